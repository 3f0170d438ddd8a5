//! A decided request as one debug line (`--log-level debug`, their `LOG_LEVEL=debug`): the
//! domain, the overall code as a word, the rule whose descriptor decided an OVER_LIMIT, and
//! each descriptor as `entries → CODE rule`. What a client sent is shown bounded and
//! escaped: at most [`MAX_DESCRIPTORS`] descriptors of [`MAX_ENTRIES`] entries, keys and
//! values cut to [`MAX_BYTES`] bytes, bytes that are not UTF-8 as `\xNN` (as stats keys show
//! them), control characters and quotes escaped. The line is built only when debug is on.

use std::fmt::Write;

use super::plan::Matched;
use super::proto::RateLimitRequest;
use super::response::code_name;
use crate::config::push_shown;
use crate::limiter::{Code, Decision, Outcome, Plan};

/// Most descriptors one line shows (the count of the others follows).
pub const MAX_DESCRIPTORS: usize = 8;
/// Most entries shown of one descriptor.
pub const MAX_ENTRIES: usize = 8;
/// Longest key or value shown, in bytes (longer ones end with `…`).
pub const MAX_BYTES: usize = 64;

fn word(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::OverLimit => "OVER_LIMIT",
    }
}

/// Append `bytes` as a log shows them (see the module comment).
fn push_bounded(out: &mut String, bytes: &[u8]) {
    let cut = bytes.len() > MAX_BYTES;
    let mut shown = String::new();
    push_shown(&mut shown, &bytes[..bytes.len().min(MAX_BYTES)]);
    out.extend(shown.chars().flat_map(char::escape_debug));
    if cut {
        out.push('…');
    }
}

/// The rule a descriptor's match names: its config path, or the override's stats key.
fn rule<'a>(m: &'a Matched<'_>) -> Option<&'a str> {
    match (&m.m, &m.override_key) {
        (Some(mm), _) => Some(&mm.rule.full_key),
        (None, Some(k)) => Some(k),
        (None, None) => None,
    }
}

/// Log the decision of `req` at debug level.
pub(super) fn decided(
    req: &RateLimitRequest,
    plans: &[Plan<'_>],
    matched: &[Matched<'_>],
    decision: &Decision,
    overall: i32,
) {
    let mut descriptors = String::new();
    let mut deciding = None;
    let rows = req
        .descriptors
        .iter()
        .zip(plans)
        .zip(matched)
        .zip(&decision.outcomes);
    for (i, (((d, plan), m), outcome)) in rows.enumerate() {
        let denied = matches!(outcome, Outcome::Metered(v) if v.code == Code::OverLimit);
        if denied && deciding.is_none() {
            deciding = rule(m);
        }
        if i == MAX_DESCRIPTORS {
            let _ = write!(descriptors, "; … {} more", req.descriptors.len() - i);
            continue;
        }
        if i > MAX_DESCRIPTORS {
            continue;
        }
        if i > 0 {
            descriptors.push_str("; ");
        }
        for (j, e) in d.entries.iter().take(MAX_ENTRIES).enumerate() {
            if j > 0 {
                descriptors.push(',');
            }
            push_bounded(&mut descriptors, &e.key);
            descriptors.push('=');
            push_bounded(&mut descriptors, &e.value);
        }
        if d.entries.len() > MAX_ENTRIES {
            descriptors.push_str(",…");
        }
        descriptors.push_str(" → ");
        let _ = match (plan, outcome, rule(m)) {
            (_, Outcome::Metered(v), Some(r)) => write!(
                descriptors,
                "{} {r}{}",
                word(v.code),
                if v.shadowed { " (shadow mode)" } else { "" }
            ),
            (_, Outcome::Unlimited, Some(r)) => write!(descriptors, "OK {r} (unlimited)"),
            // A rule matched, and another's `replaces` dropped it.
            (Plan::NoLimit, _, Some(r)) => write!(descriptors, "OK (replaced: {r})"),
            _ => write!(descriptors, "OK (no rule)"),
        };
    }
    tracing::debug!(
        domain = %super::unknown_domain::shown(&req.domain),
        code = %code_name(overall),
        rule = %deciding.unwrap_or("-"),
        descriptors = %descriptors,
        "decided"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_bytes_are_cut_short_and_escaped() {
        let mut out = String::new();
        push_bounded(&mut out, b"\xFFa\"b\n");
        assert_eq!(out, "\\\\xFFa\\\"b\\n");
        let mut out = String::new();
        push_bounded(&mut out, &[b'x'; 100]);
        assert_eq!(out, format!("{}…", "x".repeat(MAX_BYTES)));
    }
}
