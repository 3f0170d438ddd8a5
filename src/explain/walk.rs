//! The matcher's walk (`Domain::find_traced`) recorded as explained steps: what matched at
//! each level and how, which wildcards were tried, and where and why the walk stopped.

use serde::Serialize;

use crate::config::{Domain, How, Match, Step, Trace};

/// One level of the walk.
#[derive(Debug, Serialize)]
pub struct StepExplanation {
    /// The request entry, counted from 1 (0: the descriptor has none).
    pub entry: usize,
    pub key: String,
    pub value: String,
    /// `exact`, `wildcard`, `key_only`; or why the walk stopped here: `no_match`,
    /// `no_children`, `no_rule`, `too_deep`, `no_entries`.
    pub result: &'static str,
    /// The node reached (its config key: `key`, `key_value` or a glob).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Wildcards of this key tried (in declaration order) that did not match.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wildcards_not_matching: Vec<String>,
    /// A key-only child of this level that the walk will never come back to, because an
    /// exact or wildcard child matched first (no backtracking).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_only_not_tried: Option<String>,
    /// `no_match`: every child of the level, in declaration order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    pub why: String,
}

struct Recorder<'e> {
    entries: &'e [(&'e str, &'e str)],
    steps: Vec<StepExplanation>,
}

impl Recorder<'_> {
    fn push(
        &mut self,
        entry: Option<usize>,
        result: &'static str,
        why: String,
    ) -> &mut StepExplanation {
        let (key, value) = entry
            .and_then(|i| self.entries.get(i))
            .map_or(("", ""), |&(k, v)| (k, v));
        self.steps.push(StepExplanation {
            entry: entry.map_or(0, |i| i + 1),
            key: key.to_owned(),
            value: value.to_owned(),
            result,
            node: None,
            wildcards_not_matching: Vec::new(),
            key_only_not_tried: None,
            children: Vec::new(),
            why,
        });
        let last = self.steps.len() - 1;
        &mut self.steps[last]
    }

    /// The node the previous step reached.
    fn last_node(&self) -> String {
        self.steps
            .last()
            .and_then(|s| s.node.clone())
            .unwrap_or_default()
    }
}

/// The wildcards of a level that could concern `key`: a glob is matched against the whole
/// `key_value`, so one that cannot start with `key_` (another key's) is left out.
fn wildcards_for(children: &crate::config::Children<'_>, key: &str) -> Vec<String> {
    let prefix = format!("{key}_");
    children
        .wildcards()
        .into_iter()
        .filter(|g| {
            let first = g.split('*').next().unwrap_or_default();
            prefix.starts_with(first) || first.starts_with(&prefix)
        })
        .map(str::to_owned)
        .collect()
}

fn list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl<'a> Trace<'a> for Recorder<'_> {
    fn step(&mut self, step: Step<'a>) {
        match step {
            Step::NoEntries => {
                self.push(
                    None,
                    "no_entries",
                    "the descriptor has no entries".to_owned(),
                );
            }
            Step::TooDeep { max } => {
                self.push(
                    None,
                    "too_deep",
                    format!(
                        "the descriptor has more than {max} entries, deeper than any rule tree"
                    ),
                );
            }
            Step::Matched {
                entry,
                how,
                node,
                children,
            } => {
                let (key, value) = self.entries.get(entry).copied().unwrap_or_default();
                let wildcards = wildcards_for(&children, key);
                let (result, tried, why) = match how {
                    How::Exact => ("exact", Vec::new(), format!("matched '{node}' exactly")),
                    How::Wildcard => {
                        let before: Vec<String> = wildcards
                            .iter()
                            .take_while(|w| *w != node)
                            .cloned()
                            .collect();
                        let why = if before.is_empty() {
                            format!("no child '{key}_{value}'; the wildcard '{node}' matches")
                        } else {
                            format!(
                                "no child '{key}_{value}'; the wildcards {} do not match, '{node}' does (the first match in declaration order wins)",
                                list(&before)
                            )
                        };
                        ("wildcard", before, why)
                    }
                    How::KeyOnly => {
                        let why = if wildcards.is_empty() {
                            format!(
                                "no child '{key}_{value}' and no wildcard; matched the key-only child '{node}' (any value)"
                            )
                        } else {
                            format!(
                                "no child '{key}_{value}', no wildcard matches (tried {}); matched the key-only child '{node}' (any value)",
                                list(&wildcards)
                            )
                        };
                        ("key_only", wildcards, why)
                    }
                };
                // A key-only sibling is never tried once an exact or wildcard child matched.
                let skipped = (how != How::KeyOnly && children.final_keys().contains(&key))
                    .then(|| key.to_owned());
                let s = self.push(Some(entry), result, why);
                s.node = Some(node.to_owned());
                s.wildcards_not_matching = tried;
                s.key_only_not_tried = skipped;
            }
            Step::NoMatch { entry, children } => {
                let (key, value) = self.entries.get(entry).copied().unwrap_or_default();
                let wildcards = wildcards_for(&children, key);
                let mut why = format!("nothing here matches: no child '{key}_{value}'");
                if !wildcards.is_empty() {
                    why.push_str(&format!(
                        ", no wildcard matches (tried {})",
                        list(&wildcards)
                    ));
                }
                why.push_str(&format!(", no key-only child '{key}'"));
                let all = children
                    .final_keys()
                    .iter()
                    .map(|k| k.to_string())
                    .collect();
                let s = self.push(Some(entry), "no_match", why);
                s.wildcards_not_matching = wildcards;
                s.children = all;
            }
            Step::NoChildren { entry } => {
                let node = self.last_node();
                let more = self.entries.len().saturating_sub(entry + 1);
                let entries = if more == 1 { "entry" } else { "entries" };
                let s = self.push(
                    Some(entry),
                    "no_children",
                    format!(
                        "'{node}' has no deeper descriptors, but the request has {more} more {entries}"
                    ),
                );
                s.node = Some(node);
            }
            Step::NoRule { entry } => {
                let node = self.last_node();
                let s = self.push(
                    Some(entry),
                    "no_rule",
                    format!("the request ends here, but '{node}' has no rate_limit"),
                );
                s.node = Some(node);
            }
        }
    }
}

/// Walk `entries` through `domain` with the matcher itself, recording each step.
pub(super) fn walk<'a>(
    domain: &'a Domain,
    entries: &[(&str, &str)],
) -> (Option<Match<'a>>, Vec<StepExplanation>) {
    let mut rec = Recorder {
        entries,
        steps: Vec::new(),
    };
    let m = domain.find_traced(entries, &mut rec);
    (m, rec.steps)
}

/// Why a walk that matched no rule gave no limit, from its last step.
pub(super) fn stop_reason(steps: &[StepExplanation]) -> String {
    let Some(last) = steps.last() else {
        return "no rule matches: OK without a limit".to_owned();
    };
    let at = format!("entry {} ({}={})", last.entry, last.key, last.value);
    let mut reason = match last.result {
        "no_match" => format!("the walk stopped at {at}: nothing at that level matches"),
        "no_children" => format!(
            "the walk stopped at {at}: a limit applies only where the request's last entry lands, and '{}' has nothing below it",
            last.node.as_deref().unwrap_or_default()
        ),
        "no_rule" => format!(
            "the request's last entry lands on '{}', which has no rate_limit",
            last.node.as_deref().unwrap_or_default()
        ),
        _ => last.why.clone(),
    };
    // Point at the branch the walk will not go back to.
    if let Some(s) = steps.iter().rev().find(|s| s.key_only_not_tried.is_some()) {
        reason.push_str(&format!(
            "; no backtracking: at entry {} the walk took '{}', so the key-only '{}' there is never tried",
            s.entry,
            s.node.as_deref().unwrap_or_default(),
            s.key_only_not_tried.as_deref().unwrap_or_default()
        ));
    }
    reason.push_str(": OK without a limit");
    reason
}
