//! Two stores, one for per-second limits (envoyproxy/ratelimit's `REDIS_PERSECOND`): the
//! busiest, shortest-lived keys go to a Redis of their own, sized and scaled apart.
//!
//! **Which checks are per-second.** A check (one descriptor) goes to the per-second store
//! when every one of its limits has the unit SECOND; a check mixing units (a `rate_limits`
//! list with a per-second burst and a daily quota) stays whole on the main store. All limits
//! of one descriptor are decided by one script on one Redis, atomically (a burst denial must
//! not charge the quota); splitting them over two servers would lose that. For rules with a
//! single limit, as theirs always are, this is exactly their rule ("keys whose unit is
//! SECOND").
//!
//! **One round trip per store.** A request's checks are split by destination, both stores
//! run concurrently (each is still one pipeline), and the results are merged back in the
//! order of the checks. A failure of either fails the request, tagged with the store's name
//! so metrics and logs say which Redis failed.
//!
//! **Stop-increment** over both stores is sequential: the per-second store first, and a
//! denial there holds the main store's descriptors; a denial on the main store cannot
//! un-charge the per-second descriptors already admitted (not atomic across two servers).

use super::redis::{Fate, RedisStore};
use crate::limit::{Charge, Check, LimitResult, LimitSpec, StateTag, Unit};
use crate::store::{Call, CallId, Ids, Store, StoreError};

/// Routes each check to `main` or `per_second` (see the module documentation).
pub struct PerSecond<S> {
    pub main: S,
    pub per_second: S,
}

/// Name of the per-second store in metrics and errors.
pub const PER_SECOND: &str = "redis_per_second";

/// Whether a check belongs to the per-second store: it has limits, all per second.
pub fn is_per_second(check: &Check<'_>) -> bool {
    !check.limits.is_empty() && check.limits.iter().all(|l| l.unit == Unit::Second)
}

/// Whether any (non-refund) check of `checks` was denied in `results`.
fn denies(checks: &[Check<'_>], results: &[LimitResult]) -> bool {
    let mut at = 0;
    checks.iter().any(|c| {
        let r = results.get(at..at + c.limits.len()).unwrap_or(&[]);
        at += c.limits.len();
        !c.refund && r.iter().any(|r| !r.allowed)
    })
}

fn tagged(e: StoreError) -> StoreError {
    StoreError::In {
        store: PER_SECOND,
        error: Box::new(e),
    }
}

impl<S: Store> Store for PerSecond<S> {
    /// Each check where it goes, under the call's ids on both stores (each records them on
    /// its own Redis, for its own share: sent again, the same checks split the same way).
    /// envoyproxy/ratelimit's keys stay behind: their counters are the main Redis's.
    async fn run(&self, call: &Call<'_>, out: &mut Vec<LimitResult>) -> Result<(), StoreError> {
        let fast = call.checks.iter().filter(|c| is_per_second(c)).count();
        let whole = Call {
            keys: None,
            ..*call
        };
        if fast == 0 {
            return self.main.run(&whole, out).await;
        }
        if fast == call.checks.len() {
            return self.per_second.run(&whole, out).await.map_err(tagged);
        }
        let (main_checks, fast_checks): (Vec<Check<'_>>, Vec<Check<'_>>) =
            call.checks.iter().partition(|c| !is_per_second(c));
        let (main_segments, fast_segments) = (segments(call, false), segments(call, true));
        let side = |checks, segments| Call {
            checks,
            ids: match call.ids {
                Ids::WriteBack(_) => Ids::WriteBack(segments),
                ids => ids,
            },
            ..whole
        };
        let (main, fast) = (
            side(&main_checks, &main_segments),
            side(&fast_checks, &fast_segments),
        );
        let (mut main_out, mut fast_out) = (Vec::new(), Vec::new());
        if call.charge == Charge::StopWhenOver {
            // Stop-increment over two servers: the per-second store first (its bursts are
            // what usually denies); a denial there holds the main store's descriptors. A
            // denial on the main store cannot un-charge the per-second ones (documented).
            self.per_second
                .run(&fast, &mut fast_out)
                .await
                .map_err(tagged)?;
            let charge = if denies(&fast_checks, &fast_out) {
                Charge::Held
            } else {
                call.charge
            };
            self.main
                .run(&Call { charge, ..main }, &mut main_out)
                .await?;
        } else {
            let (m, f) = futures::join!(
                self.main.run(&main, &mut main_out),
                self.per_second.run(&fast, &mut fast_out),
            );
            m?;
            f.map_err(tagged)?;
        }
        // Each check yields exactly `limits.len()` results: deal them back in check order.
        let (mut main_out, mut fast_out) = (main_out.into_iter(), fast_out.into_iter());
        for c in call.checks {
            let from = if is_per_second(c) {
                &mut fast_out
            } else {
                &mut main_out
            };
            out.extend(from.by_ref().take(c.limits.len()));
        }
        Ok(())
    }

    /// The descriptor's state lives where its checks go: reset it there.
    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        let check = Check {
            tag,
            limits,
            cost: 0,
            refund: false,
        };
        if is_per_second(&check) {
            self.per_second.reset(tag, limits).await.map_err(tagged)
        } else {
            self.main.reset(tag, limits).await
        }
    }

    fn is_ready(&self) -> bool {
        self.main.is_ready() && self.per_second.is_ready()
    }
}

/// A write-back's segments as one side sees them: each batch's checks that go to the
/// per-second store (`fast`) or stay (empty batches left out).
fn segments(call: &Call<'_>, fast: bool) -> Vec<(CallId, usize)> {
    let Ids::WriteBack(all) = call.ids else {
        return Vec::new();
    };
    let mut rest = call.checks;
    all.iter()
        .filter_map(|&(id, n)| {
            let (batch, after) = rest.split_at(n.min(rest.len()));
            rest = after;
            let k = batch.iter().filter(|c| is_per_second(c) == fast).count();
            (k > 0).then_some((id, k))
        })
        .collect()
}

impl PerSecond<RedisStore> {
    /// What became of a request call that did not end answered: one half ran on each Redis
    /// under the same id, so the call's fate is known only when both halves' are and agree
    /// (or either may still run). A half that was answered, or that never was (the call
    /// went to one Redis), leaves nothing kept: unknown, and resent under its id, which
    /// the half that ran only reports. Either way nothing stays kept once told.
    pub fn fate(&self, id: CallId) -> Fate {
        let (main, fast) = (&self.main.fates, &self.per_second.fates);
        let fate = match (main.peek(id), fast.peek(id)) {
            (Some(a), Some(b)) if a == b => a,
            (Some(Fate::InFlight), Some(_)) | (Some(_), Some(Fate::InFlight)) => Fate::InFlight,
            _ => Fate::Unknown,
        };
        if fate != Fate::InFlight {
            main.forget(id);
            fast.forget(id);
        }
        fate
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::limit::ManualClock;
    use crate::store::memory::MemoryStore;

    fn spec(rate: u64, unit: Unit) -> LimitSpec {
        LimitSpec::fixed_window(rate, unit)
    }

    fn check<'a>(name: &str, limits: &'a [LimitSpec]) -> Check<'a> {
        Check {
            tag: StateTag::compute("d", [("k", name)]),
            limits,
            cost: 1,
            refund: false,
        }
    }

    #[tokio::test]
    async fn checks_go_where_their_units_say_and_results_keep_their_order() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let store = PerSecond {
            main: MemoryStore::new(clock.clone()),
            per_second: MemoryStore::new(clock),
        };
        let sec = [spec(5, Unit::Second)];
        let day = [spec(7, Unit::Day)];
        let mixed = [spec(3, Unit::Second), spec(9, Unit::Day)];
        let checks = [
            check("a", &sec),
            check("b", &day),
            check("c", &mixed),
            check("d", &sec),
        ];
        let mut out = Vec::new();
        store.run(&Call::new(&checks), &mut out).await.expect("run");
        let remaining: Vec<u64> = out.iter().map(|r| r.remaining).collect();
        assert_eq!(remaining, [4, 6, 2, 8, 4]);

        // What each store holds: hitting the same checks on each store alone shows the
        // counts each has already seen.
        let mut out = Vec::new();
        store
            .per_second
            .run(&Call::new(&[check("a", &sec), check("b", &day)]), &mut out)
            .await
            .expect("run");
        assert_eq!(out[0].remaining, 3, "a was counted on the per-second store");
        assert_eq!(out[1].remaining, 6, "b was not");
        let mut out = Vec::new();
        store
            .main
            .run(
                &Call::new(&[check("c", &mixed), check("a", &sec)]),
                &mut out,
            )
            .await
            .expect("run");
        assert_eq!(
            [out[0].remaining, out[1].remaining, out[2].remaining],
            [1, 7, 4],
            "the mixed check stayed whole on the main store; a never reached it"
        );
    }

    #[tokio::test]
    async fn a_reset_reaches_the_store_that_holds_the_state() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let store = PerSecond {
            main: MemoryStore::new(clock.clone()),
            per_second: MemoryStore::new(clock),
        };
        let (sec, day) = ([spec(5, Unit::Second)], [spec(7, Unit::Day)]);
        let mut out = Vec::new();
        store
            .run(&Call::new(&[check("a", &sec), check("b", &day)]), &mut out)
            .await
            .expect("run");
        let (a, b) = (check("a", &sec), check("b", &day));
        assert_eq!(store.reset(a.tag, &sec).await.expect("reset"), 1);
        assert_eq!(store.reset(b.tag, &day).await.expect("reset"), 1);
        assert!(store.main.is_empty() && store.per_second.is_empty());
    }

    #[test]
    fn per_second_means_every_limit_per_second() {
        let sec = [spec(1, Unit::Second), spec(2, Unit::Second)];
        let mixed = [spec(1, Unit::Second), spec(2, Unit::Minute)];
        assert!(is_per_second(&check("x", &sec)));
        assert!(!is_per_second(&check("x", &mixed)));
        assert!(!is_per_second(&check("x", &[])));
    }
}
