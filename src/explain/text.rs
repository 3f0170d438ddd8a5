//! The human-readable form of an [`Explanation`] (`sluice explain` without `--json`).

use std::fmt::Write;

use super::{DescriptorExplanation, Explanation, LimitExplanation};

/// Render `e` as text, one block per descriptor.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let loaded = if e.domains.is_empty() {
        "none".to_owned()
    } else {
        e.domains.join(", ")
    };
    let found = if e.domain_found { "" } else { "NOT LOADED; " };
    let _ = writeln!(out, "domain '{}' ({found}loaded: {loaded})", e.domain);
    match e.store {
        Some(store) => {
            let _ = writeln!(
                out,
                "store: {store}; Redis keys under prefix '{}'",
                e.redis_key_prefix
            );
        }
        None => {
            let _ = writeln!(out, "Redis keys under prefix '{}'", e.redis_key_prefix);
        }
    }
    for (i, d) in e.descriptors.iter().enumerate() {
        out.push('\n');
        descriptor(&mut out, i + 1, d);
    }
    out
}

fn descriptor(out: &mut String, n: usize, d: &DescriptorExplanation) {
    let entries: Vec<String> = d
        .entries
        .iter()
        .map(|e| format!("{}={}", e.key, e.value))
        .collect();
    let _ = writeln!(out, "descriptor {n}: {}", entries.join(", "));
    for s in &d.steps {
        let node = s
            .node
            .as_deref()
            .map(|n| format!(" -> {n}"))
            .unwrap_or_default();
        if s.entry > 0 {
            let _ = writeln!(
                out,
                "  entry {} {}={}: {}{node}",
                s.entry, s.key, s.value, s.result
            );
        } else {
            let _ = writeln!(out, "  {}", s.result);
        }
        let _ = writeln!(out, "    {}", s.why);
        if let Some(k) = &s.key_only_not_tried {
            let _ = writeln!(
                out,
                "    (the key-only child '{k}' of this level is not tried: no backtracking)"
            );
        }
        if !s.children.is_empty() {
            let _ = writeln!(out, "    this level has: {}", s.children.join(", "));
        }
    }
    let _ = writeln!(out, "  => {}: {}", d.outcome, d.reason);
    if let Some(r) = &d.rule {
        let mut line = format!("  rule: {}", r.full_key);
        if !r.names.is_empty() {
            let _ = write!(line, " (name: {})", r.names.join(", "));
        }
        if r.shadow_mode {
            line.push_str(", shadow_mode");
        }
        if r.quota_mode {
            line.push_str(", quota_mode");
        }
        if !r.replaces.is_empty() {
            let _ = write!(line, ", replaces: {}", r.replaces.join(", "));
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(k) = &d.stats_key {
        let _ = writeln!(out, "  stats key: {k}");
    }
    if d.limits.len() > 1 {
        let _ = writeln!(
            out,
            "  {} limits, decided all-or-nothing (a hit denied by one is charged to none, except with overdraft):",
            d.limits.len()
        );
    }
    for l in &d.limits {
        limit(out, l);
    }
}

fn limit(out: &mut String, l: &LimitExplanation) {
    let h = &l.head;
    let unit = h.unit.to_ascii_lowercase();
    let window = match h.unit_multiplier {
        0 | 1 => unit,
        m => format!("{m} {unit}s"),
    };
    let window = match &h.time_zone {
        Some(tz) => format!("calendar {window} in {tz}"),
        None => window,
    };
    let name = h
        .name
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    let mut how = match h.algorithm {
        "fixed_window" if h.time_zone.is_some() => "calendar periods".to_owned(),
        "fixed_window" => "epoch-aligned windows".to_owned(),
        "sliding_window" => format!(
            "trailing window in {} sub-windows",
            l.buckets.unwrap_or_default()
        ),
        "sliding_log" => "exact trailing window".to_owned(),
        _ => format!("burst {}", l.burst.unwrap_or_default()),
    };
    how.push_str(if l.overdraft {
        "; overdraft: every hit is charged, allowed or not"
    } else {
        "; only admitted hits are charged"
    });
    if l.penalty_seconds > 0 {
        let _ = write!(
            how,
            "; a denial locks the descriptor out for {} s",
            l.penalty_seconds
        );
    }
    let _ = writeln!(
        out,
        "  limit{name} (slot {}): {} per {window}, {}: {how}",
        h.slot, h.requests_per_unit, h.algorithm
    );
    let c = &l.current_limit;
    let _ = writeln!(
        out,
        "    current_limit: {} per {}",
        c.requests_per_unit, c.unit
    );
    let _ = writeln!(out, "    redis key: {}", l.redis_key);
    if let Some(k) = &l.redis_lock_key {
        let _ = writeln!(out, "    penalty lock key: {k}");
    }
}
