//! `--redis-reference-keys`: envoyproxy/ratelimit's own fixed window, for a fleet where
//! their pods and sluice's share one Redis during a migration. A check that means exactly
//! what theirs means (one fixed-window limit of one unit, charged whatever it decides, no
//! penalty, not a refund, no stop-increment) is sent as their pipelined
//! `INCRBY key hits` + `EXPIRE key ttl`, under their key
//! `CACHE_KEY_PREFIX + domain + "_" + Σ(key + "_" + value + "_") + windowStart` (Unix
//! seconds, `src/limiter/cache_key.go`), and decided from the count `INCRBY` returns, as
//! theirs is: both count one counter. Every other check goes to the script as usual.
//!
//! What it gives up (`docs/how-to/migrate-from-envoyproxy-ratelimit.md`): windows are timed by
//! each instance's clock (theirs are too, hence local time only), the key has no hash tag
//! (on a cluster each key is on a slot of its own, one pipeline per key, concurrently), and
//! the two commands are not one atomic step (a crash in between leaves a key without TTL
//! until the next hit sets it, as theirs does).

use std::time::Instant;

use redis::{self, RedisError};

use super::conn::Conn;
use super::pipeline::add_counts;
use super::{RedisStore, is_connection_error};
use crate::limit::{Algorithm, Charge, Check, LimitResult};
use crate::store::{Call, StoreError};

pub(super) use super::pipeline::Counted;

/// Whether `check` means exactly what the reference's fixed window means.
pub(super) fn qualifies(check: &Check<'_>) -> bool {
    let [l] = check.limits else { return false };
    l.algorithm == Algorithm::FixedWindow
        && l.overdraft
        && l.penalty_ms == 0
        && l.unit_multiplier == 1
        // Their windows are the epoch's: a calendar period is the script's.
        && l.calendar.is_none()
        && !check.refund
        // INCRBY's range; and the count stays exact where the script's would.
        && check.cost <= 1 << 52
}

/// Their key for a window of `window_ms` at `now_ms`: prefix, base, then the window's start
/// in Unix seconds.
pub(super) fn key(prefix: &str, base: &[u8], now_ms: u64, window_ms: u64) -> Vec<u8> {
    let start_s = (now_ms - now_ms % window_ms) / 1000;
    let mut k = Vec::with_capacity(prefix.len() + base.len() + 12);
    k.extend_from_slice(prefix.as_bytes());
    k.extend_from_slice(base);
    k.extend_from_slice(start_s.to_string().as_bytes());
    k
}

/// The result of a check whose `INCRBY` returned `count`: the script's fixed-window answer
/// (path 1 of `main.lua`), from their decision rule (over iff the count after the hit exceeds
/// the limit).
pub(super) fn result(
    count: i64,
    hits: u64,
    capacity: u64,
    now_ms: u64,
    window_ms: u64,
) -> LimitResult {
    let after = u64::try_from(count).unwrap_or(0);
    let reset_ms = window_ms - now_ms % window_ms;
    let allowed = after <= capacity;
    LimitResult {
        allowed,
        remaining: if allowed { capacity - after } else { 0 },
        reset_ms,
        retry_ms: (!allowed).then_some(reset_ms),
        used_before: after.saturating_sub(hits),
        penalized: false,
    }
}

/// What one `INCRBY` returned, as the count (a server error, e.g. `WRONGTYPE`, as an error).
fn count_of(v: redis::Value) -> Result<i64, RedisError> {
    match v {
        redis::Value::Int(n) => Ok(n),
        redis::Value::ServerError(e) => Err(e.into()),
        other => Err(RedisError::from((
            redis::ErrorKind::Parse,
            "INCRBY did not return an integer",
            format!("{other:?}"),
        ))),
    }
}

impl RedisStore {
    /// With `--redis-reference-keys` (their `CACHE_KEY_PREFIX` in `prefix`), the checks of
    /// `call` that qualify are counted under their `keys`, the others by the script,
    /// concurrently (one round trip).
    pub(super) async fn run_reference(
        &self,
        call: &Call<'_>,
        keys: &[Option<&[u8]>],
        prefix: &str,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let checks = call.checks;
        let theirs = |i: usize| {
            call.charge == Charge::Each
                && keys.get(i).copied().flatten().is_some()
                && qualifies(&checks[i])
        };
        if !(0..checks.len()).any(theirs) {
            return self.run_script(call, out).await;
        }
        let now_ms = self.clock.now_ms();
        let mut counted = Vec::new();
        let mut scripted = Vec::new();
        for (i, c) in checks.iter().enumerate() {
            match keys.get(i).copied().flatten() {
                Some(base) if theirs(i) => {
                    let l = &c.limits[0];
                    let window_ms = l.window_ms();
                    counted.push(Counted {
                        key: key(prefix, base, now_ms, window_ms),
                        hits: c.cost,
                        ttl_s: window_ms / 1000 + self.slack_ms.div_ceil(1000),
                    });
                }
                _ => scripted.push(*c),
            }
        }
        let mut script_out = Vec::new();
        let script_call = Call {
            checks: &scripted,
            keys: None,
            ..*call
        };
        let (counts, script) = futures::join!(
            self.count(counted, self.deadline(call)),
            self.run_script(&script_call, &mut script_out)
        );
        let counts = counts?;
        script?;
        let (mut counts, mut script_out) = (counts.into_iter(), script_out.into_iter());
        for (i, c) in checks.iter().enumerate() {
            if theirs(i) {
                let l = &c.limits[0];
                let count = counts.next().unwrap_or(0);
                out.push(result(count, c.cost, l.capacity(), now_ms, l.window_ms()));
            } else {
                out.extend(script_out.by_ref().take(c.limits.len()));
            }
        }
        Ok(())
    }

    /// `INCRBY` + `EXPIRE` per check in one round trip ending by `deadline`: on a single
    /// node in the batcher's next pipeline (with the other requests' checks), on a cluster
    /// one pipeline per key (concurrently). The counts `INCRBY` returned, in order.
    async fn count(
        &self,
        counted: Vec<Counted>,
        deadline: Instant,
    ) -> Result<Vec<i64>, StoreError> {
        let n = counted.len();
        let Some(lease) = self.ring.pick() else {
            return Err(StoreError::Unavailable("redis is not connected".into()));
        };
        let pipe = |items: &[Counted]| {
            let mut p = redis::pipe();
            add_counts(&mut p, items);
            p
        };
        let sent = async {
            match &lease.conn {
                Conn::Single(batcher) => {
                    let values = batcher.count(counted).await?;
                    values
                        .into_iter()
                        .map(count_of)
                        .collect::<Result<Vec<i64>, RedisError>>()
                }
                Conn::Cluster(c) => {
                    let each = counted.iter().map(|item| {
                        let mut conn = c.clone();
                        let p = pipe(std::slice::from_ref(item));
                        async move { p.query_async::<Vec<i64>>(&mut conn).await }
                    });
                    let counts: Result<Vec<Vec<i64>>, RedisError> =
                        futures::future::join_all(each).await.into_iter().collect();
                    Ok(counts?.into_iter().flatten().collect())
                }
            }
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        // A timeout alone never drops the connection: the batcher (single node) tells a slow
        // connection from a dead one by its replies.
        match tokio::time::timeout_at(deadline.into(), sent).await {
            Err(_) => Err(StoreError::Timeout(budget)),
            Ok(Err(e)) if is_connection_error(&e) => {
                self.ring.broken(&lease);
                Err(StoreError::Unavailable(e.into()))
            }
            Ok(Err(e)) => Err(StoreError::Backend(e.into())),
            Ok(Ok(counts)) if counts.len() == n => Ok(counts),
            Ok(Ok(counts)) => Err(StoreError::Backend(
                format!("expected {} counts, got {}", n, counts.len()).into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_theirs() {
        // Their tests: `domain_key_value_1234` (SECOND at 1234 s), an HOUR at 1 000 000 s.
        assert_eq!(
            key("", b"domain_key_value_", 1_234_567, 1000),
            b"domain_key_value_1234"
        );
        assert_eq!(
            key("", b"domain_key3_value3_", 1_000_000_000, 3_600_000),
            b"domain_key3_value3_997200"
        );
        assert_eq!(
            key("prefix:", b"domain_key_value_", 1_234_000, 1000),
            b"prefix:domain_key_value_1234"
        );
    }

    #[test]
    fn calendar_windows_are_not_theirs() {
        let theirs = [crate::limit::LimitSpec::fixed_window(
            5,
            crate::limit::Unit::Month,
        )];
        let calendar = [crate::limit::LimitSpec {
            calendar: Some(crate::limit::Calendar::utc()),
            ..theirs[0].clone()
        }];
        let check = |limits| Check {
            tag: crate::limit::StateTag(1),
            limits,
            cost: 1,
            refund: false,
        };
        assert!(qualifies(&check(&theirs)));
        assert!(!qualifies(&check(&calendar)));
    }

    #[test]
    fn decided_from_the_count_after_the_hit() {
        let r = result(3, 1, 3, 1_500, 1000);
        assert!(r.allowed);
        assert_eq!((r.remaining, r.reset_ms, r.used_before), (0, 500, 2));
        let r = result(4, 1, 3, 1_500, 1000);
        assert!(!r.allowed);
        assert_eq!((r.remaining, r.retry_ms, r.used_before), (0, Some(500), 3));
    }
}
