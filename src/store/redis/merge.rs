//! Cross-request merging of script calls (see `batch.rs`): several requests' calls as one
//! `EVALSHA`, and its reply cut back into theirs. A merged call is exactly the call
//! `Invocation::new` would build over all their checks in order (the tests hold it to that),
//! so the script needs nothing new.

use redis::Value;

use super::script::{Invocation, Mode, PER_CALENDAR, PER_LIMIT, REPLY_PER_LIMIT};

impl Invocation {
    /// The call's numbers, unpacked.
    fn numbers(&self) -> Vec<f64> {
        self.args
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            .collect()
    }

    /// Whether this call may share one script call with another request's `other` (see
    /// [`Invocation::merge`]): both charge each check by its own decision (a stop-increment,
    /// held or dry call decides over all of its checks together) at the same `now` and slack.
    pub fn merges_with(&self, other: &Invocation) -> bool {
        let head = |c: &Invocation| -> Option<[u8; 24]> { c.args.get(..24)?.try_into().ok() };
        let each = |c: &Invocation| c.args.get(16..24) == Some(&Mode::Each.arg().to_le_bytes());
        each(self) && each(other) && head(self).is_some() && head(self) == head(other)
    }

    /// One call doing the work of `calls` (mode `Each`, one `now`: see
    /// [`Invocation::merges_with`]), in order: their checks one after the other, their limit
    /// groups shared where equal. Its reply holds theirs in order, see [`split_reply`].
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    pub fn merge(calls: &[Invocation]) -> Invocation {
        let mut groups: Vec<Vec<f64>> = Vec::new();
        let mut checks: Vec<f64> = Vec::new();
        // Each call's segments, or one without id for a call that has none; sent only when
        // some call has an id (otherwise the merged call is unsegmented, as theirs were).
        let mut segments: Vec<f64> = Vec::new();
        let identified = calls.iter().any(|c| c.ids > 0);
        let mut head = [0.0; 3];
        let mut keys = Vec::with_capacity(calls.iter().map(|c| c.keys.len()).sum());
        let mut id_keys = Vec::new();
        let mut limits = 0;
        for call in calls {
            let a = call.numbers();
            if a.len() < 4 {
                continue;
            }
            head.copy_from_slice(&a[..3]);
            // This call's groups, by their index in the merged call.
            let mut at = 4;
            let mut index = Vec::new();
            for _ in 0..a[3] as usize {
                let k = a.get(at).copied().unwrap_or(0.0) as usize;
                // Its limits' numbers, then one calendar's per limit whose Z is not 0.
                let calendars = (1..=k)
                    .filter(|i| a.get(at + PER_LIMIT * i).is_some_and(|z| *z != 0.0))
                    .count();
                let end = (at + 1 + PER_LIMIT * k + PER_CALENDAR * calendars).min(a.len());
                let group = &a[at..end];
                let g = match groups.iter().position(|x| x.as_slice() == group) {
                    Some(g) => g,
                    None => {
                        groups.push(group.to_vec());
                        groups.len() - 1
                    }
                };
                index.push((g + 1) as f64);
                at = end;
            }
            let own = a.get(at).copied().unwrap_or(0.0) as usize;
            let end = (at + 1 + 2 * own).min(a.len());
            let pairs = &a[(at + 1).min(end)..end];
            at = end;
            if own > 0 {
                segments.extend_from_slice(pairs);
            } else if identified {
                segments.push((a.len().saturating_sub(at) / 2) as f64);
                segments.push(0.0);
            }
            for pair in a[at..].chunks_exact(2) {
                let (n, g) = (pair[0], pair[1]);
                let i = (g.abs() as usize).saturating_sub(1);
                let mapped = index.get(i).copied().unwrap_or(0.0);
                checks.push(n);
                checks.push(if g < 0.0 { -mapped } else { mapped });
            }
            let state = call.keys.len().saturating_sub(call.ids);
            keys.extend(call.keys[..state].iter().cloned());
            id_keys.extend(call.keys[state..].iter().cloned());
            limits += call.limits;
        }
        let count = 5 + groups.iter().map(Vec::len).sum::<usize>() + segments.len() + checks.len();
        let mut args = Vec::with_capacity(8 * count);
        let mut put = |n: f64| args.extend_from_slice(&n.to_le_bytes());
        head.into_iter().for_each(&mut put);
        put(groups.len() as f64);
        groups.iter().flatten().copied().for_each(&mut put);
        put((segments.len() / 2) as f64);
        segments.into_iter().for_each(&mut put);
        checks.into_iter().for_each(&mut put);
        let ids = id_keys.len();
        keys.extend(id_keys);
        Invocation {
            keys,
            args,
            limits,
            ids,
        }
    }
}

/// The reply of a merged call ([`Invocation::merge`]) cut into the replies of the calls it
/// merged, `limits[i]` limits each: `now_ms` then their own values. A reply that is not an
/// array of the expected length (a script error, a malformed reply) goes to each as it is,
/// for [`parse_reply`](super::script::parse_reply) to report.
pub fn split_reply(value: Value, limits: &[usize]) -> Vec<Value> {
    let total: usize = limits.iter().sum();
    match value {
        Value::Array(items) if items.len() == 1 + REPLY_PER_LIMIT * total => {
            let mut out = Vec::with_capacity(limits.len());
            let mut at = 1;
            for &k in limits {
                let mut part = Vec::with_capacity(1 + REPLY_PER_LIMIT * k);
                part.push(items[0].clone());
                part.extend_from_slice(&items[at..at + REPLY_PER_LIMIT * k]);
                at += REPLY_PER_LIMIT * k;
                out.push(Value::Array(part));
            }
            out
        }
        other => vec![other; limits.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::{Algorithm, Check, LimitSpec};
    use crate::store::redis::script::CallContext;

    fn spec(algorithm: Algorithm, requests_per_unit: u64, penalty_ms: u64) -> LimitSpec {
        let unit = crate::limit::Unit::Second;
        LimitSpec {
            penalty_ms,
            ..LimitSpec::new(algorithm, requests_per_unit, unit)
        }
    }

    #[test]
    fn a_merged_call_is_the_call_of_all_its_checks() {
        let ctx = CallContext {
            now_ms: None,
            calendar_ms: 0,
            slack_ms: 5,
            prefix: "p:",
        };
        let one = [spec(Algorithm::FixedWindow, 10, 0)];
        let two = [
            spec(Algorithm::Gcra, 3, 0),
            spec(Algorithm::SlidingWindow, 7, 100),
        ];
        let check = |name: &str, limits, cost, refund| Check {
            tag: crate::limit::StateTag::compute("d", [("k", name)]),
            limits,
            cost,
            refund,
        };
        let a = [
            check("a", &one[..], 1, false),
            check("b", &two[..], 2, false),
        ];
        let b = [check("c", &two[..], 3, true)];
        let c = [check("d", &one[..], 0, false)];
        let calls = [
            Invocation::new(ctx, Mode::Each, a.iter(), None),
            Invocation::new(ctx, Mode::Each, b.iter(), None),
            Invocation::new(ctx, Mode::Each, c.iter(), None),
        ];
        assert!(calls[0].merges_with(&calls[1]));
        let merged = Invocation::merge(&calls);
        let all: Vec<Check<'_>> = a.iter().chain(&b).chain(&c).cloned().collect();
        let direct = Invocation::new(ctx, Mode::Each, all.iter(), None);
        assert_eq!(merged.keys, direct.keys);
        assert_eq!(merged.args, direct.args, "groups shared, refund signs kept");
        assert_eq!(merged.limits, 6);

        // Only calls that charge each check alone, at one now.
        let stop = Invocation::new(ctx, Mode::Stop, a.iter(), None);
        assert!(!calls[0].merges_with(&stop) && !stop.merges_with(&calls[0]));
        let later = CallContext {
            now_ms: Some(7),
            ..ctx
        };
        assert!(!calls[0].merges_with(&Invocation::new(later, Mode::Each, b.iter(), None)));
    }

    #[test]
    fn merged_ids_keep_one_segment_per_call_and_their_keys_last() {
        let ctx = CallContext {
            now_ms: None,
            calendar_ms: 0,
            slack_ms: 0,
            prefix: "p:",
        };
        let one = [spec(Algorithm::FixedWindow, 10, 0)];
        let check = |name: &str| Check {
            tag: crate::limit::StateTag::compute("d", [("k", name)]),
            limits: &one[..],
            cost: 1,
            refund: false,
        };
        let (a, b) = ([check("a"), check("b")], [check("c")]);
        let id = |key: &str| {
            Some(crate::store::redis::script::IdKey {
                key: key.to_owned(),
                ttl_ms: 500,
            })
        };
        let calls = [
            Invocation::new(ctx, Mode::Each, a.iter(), id("ida")),
            Invocation::new(ctx, Mode::Each, b.iter(), None),
            Invocation::new(ctx, Mode::Each, b.iter(), id("idc")),
        ];
        assert!(calls[0].merges_with(&calls[1]) && calls[1].merges_with(&calls[2]));
        let merged = Invocation::merge(&calls);
        assert_eq!(merged.ids, 2);
        assert_eq!(merged.keys.len(), 4 + 2);
        assert_eq!(merged.keys[4..], ["ida".to_owned(), "idc".to_owned()]);
        let n = merged.numbers();
        // now, slack, mode, G = 1, the group (1 + 8), S = 3, then the segments.
        assert_eq!(n[3], 1.0);
        assert_eq!(n[13..20], [3.0, 2.0, 500.0, 1.0, 0.0, 1.0, 500.0]);
        assert_eq!(n.len(), 20 + 2 * 4);

        // Without ids, the merged call is unsegmented, as the calls were.
        let plain = Invocation::merge(&[calls[1].clone(), calls[1].clone()]);
        assert_eq!((plain.ids, plain.numbers()[13]), (0, 0.0));
    }

    #[test]
    fn a_merged_reply_is_split_in_order() {
        let reply = Value::Array((0..=18).map(Value::Int).collect());
        let parts = split_reply(reply, &[1, 2]);
        assert_eq!(
            parts,
            vec![
                Value::Array([0, 1, 2, 3, 4, 5, 6].map(Value::Int).to_vec()),
                Value::Array(
                    [0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
                        .map(Value::Int)
                        .to_vec()
                ),
            ]
        );
        let short = Value::Array(vec![Value::Int(0)]);
        assert_eq!(
            split_reply(short.clone(), &[1, 1]),
            vec![short.clone(), short]
        );
    }
}
