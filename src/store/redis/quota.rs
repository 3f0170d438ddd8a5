//! RLQS subscriptions in Redis (`store/quota.rs`): a report batch is settled by calls of
//! `lua/quota.lua` of at most [`QUOTA_BUCKETS_PER_CALL`] buckets each, all in one pipeline, so
//! Envoys connected to different replicas share one limit and no call holds Redis longer
//! than a rate limit check does, whatever the size of the report.
//!
//! Keys: `<prefix>{rlqs}:<tag>:q`, one hash per bucket (`:q`: shares as rates, without the
//! window usage earlier builds kept under `<prefix>{rlqs}:<tag>`, which are never read). The `{rlqs}` hash tag puts every
//! bucket in one slot, so a batch of any buckets is one pipeline to one node on a cluster
//! too; quota traffic is a report per Envoy every few seconds, not a call per request, so
//! one slot carries it. The pipeline goes to a connection of the ring, outside the check
//! pipelines (as a reset does); a call answered `NOSCRIPT` is resent behind a
//! `SCRIPT LOAD` (`pipeline.rs`).
//!
//! **Why chunks give the answers one call gave.** Everything the script reads and writes
//! for a bucket is that bucket's hash: its subscribers' demands, shares and expiries. A call settles each of its buckets whole (read the hash, compute the
//! share, write it back) and Redis runs one call at a time, so each bucket's settlement is
//! atomic, as it was inside one call. No state spans two buckets, so the only thing chunks
//! change is the order in which reports reach each bucket: chunks of two concurrent reports
//! may interleave (this stream's first chunk, the other's, this stream's second), and a
//! bucket of the second chunk then sees the other report first. That order was always
//! possible: the other report could have arrived first altogether. Per bucket, the history
//! is still a sequence of whole settlements, each of which caps this subscriber's share at
//! `limit − Σ shares the others hold` at that moment, so after every settlement the shares
//! recorded for a bucket sum to at most its limit, in any order of chunks, reports and
//! replicas. The calls of one report share one `now`, so its buckets see one instant, as
//! in one call.

use std::ops::Range;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{self, RedisError, Script, ServerErrorKind, Value};

use super::conn::{Conn, Ring};
use super::pipeline::{self, ScriptCall};
use super::{RedisStore, classify};
use crate::limit::StateTag;
use crate::quota::Grant;
use crate::store::StoreError;
use crate::store::quota::{QuotaReport, QuotaStore, Subscriber};

/// `lua/quota.lua`.
pub const QUOTA_SCRIPT: &str = include_str!("../lua/quota.lua");

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(QUOTA_SCRIPT));

/// Most buckets in one report call. A bucket costs Redis 59k–88k instructions (callgrind:
/// new, and with two subscribers), 16 of them at most ~1.4M: in the SLOWLOG test the
/// slowest call of a 10 000-bucket report took 0.3–0.4 ms on the 2-core test machine under
/// a load average of 5 to 12. At 32 buckets it was 0.56–0.58 ms, and only the fourth run
/// got every call under 1 ms (the bound the rate limit scripts meet): too close on a
/// loaded machine. A call's fixed price is ~17k instructions, so small calls cost Redis
/// little more in all (~2% at 16).
pub const QUOTA_BUCKETS_PER_CALL: usize = 16;

/// The work a report call may spend (`ARGV[7]` of `lua/quota.lua`, in its unit: a bucket is
/// 16, plus six per subscriber): [`QUOTA_BUCKETS_PER_CALL`] buckets of four subscribers
/// each, and the four units the window and usage fields of earlier builds cost, kept so
/// that a call's budget, and the SLOWLOG bound measured with it, did not grow. A
/// bucket costs more the more Envoys report it, so a call over buckets with many
/// subscribers stops at this budget and its remaining buckets go in another call.
const WORK_PER_CALL: u64 = 16 * (16 + 4 * 6 + 4);

/// Most buckets in one leave call (an `HDEL` each, a fifth of a report bucket's cost).
const LEAVES_PER_CALL: usize = 64;

/// First and longest pause before resending calls that did not run because their slot is
/// moving (a cluster resharding), within the admin deadline.
const MOVING_RETRY_MIN: Duration = Duration::from_millis(1);
const MOVING_RETRY_MAX: Duration = Duration::from_millis(20);

/// The hash of bucket `tag`.
pub fn quota_key(prefix: &str, tag: StateTag) -> String {
    format!("{prefix}{{rlqs}}:{}:q", tag.to_base64url())
}

/// One call of the quota script.
struct QuotaCall {
    keys: Vec<String>,
    args: Vec<String>,
}

impl ScriptCall for QuotaCall {
    fn keys(&self) -> &[String] {
        &self.keys
    }
    fn args(&self, cmd: &mut redis::Cmd) {
        cmd.arg(&self.args);
    }
}

/// `0..n` cut into ranges of at most `size`, in order.
fn chunks(n: usize, size: usize) -> Vec<Range<usize>> {
    let size = size.max(1);
    (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect()
}

/// What a report call answered for the buckets `range`.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// Grants for the first buckets of the range (at least one), in order; the call's work
    /// budget ended there when they are fewer than the range.
    Settled(Vec<Grant>),
    /// The call did not run: its slot is moving. Safe to send again.
    Moving,
}

/// Read one report call's reply for a range of `len` buckets: anything but a prefix of at
/// least one bucket, three integers each, is an error (a reply is never trusted).
fn answer(value: Value, len: usize) -> Result<Answer, StoreError> {
    let items = match value {
        Value::Array(items) => items,
        Value::ServerError(e) => {
            if matches!(
                e.kind(),
                Some(ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain)
            ) {
                return Ok(Answer::Moving);
            }
            return Err(classify(RedisError::from(e)));
        }
        other => {
            return Err(StoreError::Backend(
                format!("quota script answered {other:?}").into(),
            ));
        }
    };
    if items.is_empty() || items.len() % 3 != 0 || items.len() / 3 > len {
        return Err(StoreError::Backend(
            format!(
                "quota script answered {} values for {len} buckets",
                items.len()
            )
            .into(),
        ));
    }
    let mut ints = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::Int(i) => ints.push(u64::try_from(i).unwrap_or(0)),
            other => {
                return Err(StoreError::Backend(
                    format!("quota script answered {other:?} for a number").into(),
                ));
            }
        }
    }
    Ok(Answer::Settled(
        ints.chunks_exact(3)
            .map(|c| Grant {
                share: c[0],
                subscribers: c[1],
                pending: c[2] != 0,
            })
            .collect(),
    ))
}

impl QuotaStore for RedisStore {
    /// Settle `reports` for `sub` (see the module documentation): calls of at most
    /// [`QUOTA_BUCKETS_PER_CALL`] buckets in one pipeline; the buckets a call left for its work
    /// budget, or that did not run on a moving slot, in another round trip, until every
    /// bucket is settled or the admin deadline passes.
    async fn report(
        &self,
        sub: Subscriber<'_>,
        reports: &[QuotaReport],
        out: &mut Vec<Grant>,
    ) -> Result<(), StoreError> {
        if reports.is_empty() {
            return Ok(());
        }
        // One instant for the whole report, as when it was one call.
        let now = self.clock.now_ms();
        let head = [
            "r".to_owned(),
            sub.id.to_owned(),
            now.to_string(),
            sub.ttl_ms.to_string(),
            sub.policy.min_share_ppm.to_string(),
            sub.policy.threshold_ppm.to_string(),
            WORK_PER_CALL.to_string(),
        ];
        let call = |range: &Range<usize>| {
            let part = &reports[range.clone()];
            let mut args = Vec::with_capacity(head.len() + 3 * part.len());
            args.extend_from_slice(&head);
            for r in part {
                args.push(r.limit.to_string());
                // The script's -1: not known yet.
                args.push(r.demand.map_or_else(|| "-1".to_owned(), |d| d.to_string()));
                args.push(r.held.to_string());
            }
            QuotaCall {
                keys: part
                    .iter()
                    .map(|r| quota_key(&self.prefix, r.bucket))
                    .collect(),
                args,
            }
        };
        // Filled by position: a range cut short by its budget finishes in a later round.
        let mut grants = vec![Grant::default(); reports.len()];
        let mut pending = chunks(reports.len(), QUOTA_BUCKETS_PER_CALL);
        let mut pause = MOVING_RETRY_MIN;
        let settle = async {
            while !pending.is_empty() {
                let calls: Vec<QuotaCall> = pending.iter().map(call).collect();
                let values = send(&self.ring, &calls).await?;
                if values.len() != calls.len() {
                    return Err(StoreError::Backend(
                        format!("{} replies for {} quota calls", values.len(), calls.len()).into(),
                    ));
                }
                let mut next = Vec::new();
                let mut moving = false;
                for (range, value) in pending.iter().zip(values) {
                    match answer(value, range.len())? {
                        Answer::Settled(g) => {
                            let done = range.start + g.len();
                            grants[range.start..done].copy_from_slice(&g);
                            if done < range.end {
                                next.push(done..range.end);
                            }
                        }
                        Answer::Moving => {
                            moving = true;
                            next.push(range.clone());
                        }
                    }
                }
                if moving {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MOVING_RETRY_MAX);
                }
                pending = next;
            }
            Ok(())
        };
        let limit = self.admin_timeout;
        tokio::time::timeout(limit, settle)
            .await
            .map_err(|_| StoreError::Timeout(limit))??;
        out.extend(grants);
        Ok(())
    }

    /// Remove `sub` from `buckets`: calls of at most `LEAVES_PER_CALL` buckets, in one
    /// pipeline.
    async fn leave(&self, sub: &str, buckets: &[StateTag]) -> Result<(), StoreError> {
        if buckets.is_empty() {
            return Ok(());
        }
        let head = ["l", sub, "0", "0", "0", "0", "0"].map(str::to_owned);
        let calls: Vec<QuotaCall> = chunks(buckets.len(), LEAVES_PER_CALL)
            .into_iter()
            .map(|range| QuotaCall {
                keys: buckets[range]
                    .iter()
                    .map(|t| quota_key(&self.prefix, *t))
                    .collect(),
                args: head.to_vec(),
            })
            .collect();
        let limit = self.admin_timeout;
        let values = tokio::time::timeout(limit, send(&self.ring, &calls))
            .await
            .map_err(|_| StoreError::Timeout(limit))??;
        for v in values {
            match v {
                Value::Int(_) => {}
                Value::ServerError(e) => return Err(classify(RedisError::from(e))),
                other => {
                    return Err(StoreError::Backend(
                        format!("quota script answered {other:?} to a leave").into(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `calls` in one pipeline on a connection of the ring (on a cluster, to the node of the
/// `{rlqs}` slot): one value per call, script errors included. On a single node the
/// connection counts as full meanwhile, so checks go to the others rather than wait
/// behind the whole report (the ring has 4 connections by default).
async fn send(ring: &Ring, calls: &[QuotaCall]) -> Result<Vec<Value>, StoreError> {
    let lease = ring
        .pick()
        .ok_or_else(|| StoreError::Unavailable("redis is not connected".into()))?;
    let sha = SCRIPT.get_hash();
    match &lease.conn {
        Conn::Single(batcher) => {
            let _checks_elsewhere = batcher.occupy();
            let mut conn = batcher.connection();
            pipeline::evalsha_all(&mut conn, sha, QUOTA_SCRIPT, calls, &[]).await
        }
        Conn::Cluster(conn) => {
            let mut conn = conn.clone();
            pipeline::evalsha_all(&mut conn, sha, QUOTA_SCRIPT, calls, &[]).await
        }
    }
    .map_err(classify)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_cut_in_order_into_bounded_chunks() {
        assert_eq!(chunks(0, 16), Vec::<Range<usize>>::new());
        assert_eq!(chunks(16, 16), vec![0..16]);
        assert_eq!(chunks(33, 16), vec![0..16, 16..32, 32..33]);
        assert_eq!(chunks(10_000, QUOTA_BUCKETS_PER_CALL).len(), 625);
    }

    #[test]
    fn a_reply_is_a_prefix_of_whole_buckets() {
        let ints = |v: &[i64]| Value::Array(v.iter().map(|&i| Value::Int(i)).collect());
        let g = Grant {
            share: 5,
            subscribers: 2,
            pending: true,
        };
        assert!(matches!(answer(ints(&[5, 2, 1]), 3), Ok(Answer::Settled(v)) if v == [g]));
        for bad in [
            ints(&[]),
            ints(&[5, 2]),
            ints(&[5, 2, 0, 5, 2, 0]),
            Value::Nil,
            Value::Array(vec![Value::BulkString(b"5".to_vec()); 3]),
        ] {
            assert!(answer(bad, 1).is_err());
        }
    }
}
