//! One round trip for all checks of a request (single node): a pipeline of `EVALSHA`s whose
//! per-command results are kept apart, so a `NOSCRIPT` (script cache emptied by `SCRIPT FLUSH`,
//! a restart or a failover) costs one more round trip for exactly the commands that did not
//! run. Resending the others would charge them twice. The quota script's calls (`quota.rs`)
//! go through the same function, on a pipeline of their own.
//!
//! The same pipeline carries, after the script calls, the reference's own `INCRBY` +
//! `EXPIRE` pairs (`--redis-reference-keys`, `reference.rs`), so those checks share the
//! batch's one read in Redis too.

use redis::aio::ConnectionLike;
use redis::{self, RedisResult, ServerErrorKind, Value};

use super::script::Invocation;

/// One check counted the reference's way: `INCRBY key hits` + `EXPIRE key ttl_s`.
pub(crate) struct Counted {
    pub key: Vec<u8>,
    pub hits: u64,
    pub ttl_s: u64,
}

/// Append `counts` to `pipe`: one reply per item, what `INCRBY` returned (`EXPIRE`'s is
/// dropped).
pub(crate) fn add_counts(pipe: &mut redis::Pipeline, counts: &[Counted]) {
    for c in counts {
        pipe.cmd("INCRBY").arg(&c.key).arg(c.hits);
        pipe.cmd("EXPIRE").arg(&c.key).arg(c.ttl_s).ignore();
    }
}

/// A script call sent as `EVALSHA` in a pipeline: the check script's [`Invocation`], and the
/// quota script's calls (`quota.rs`).
pub(crate) trait ScriptCall {
    /// Its `KEYS`.
    fn keys(&self) -> &[String];
    /// Its `ARGV`, appended to `cmd`.
    fn args(&self, cmd: &mut redis::Cmd);

    /// `EVALSHA <sha> <numkeys> KEYS... ARGV...`.
    fn evalsha(&self, sha: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(sha).arg(self.keys().len()).arg(self.keys());
        self.args(&mut cmd);
        cmd
    }
}

impl ScriptCall for Invocation {
    fn keys(&self) -> &[String] {
        &self.keys
    }
    fn args(&self, cmd: &mut redis::Cmd) {
        cmd.arg(&self.args);
    }
}

/// Send every call's `EVALSHA`, then `counts` (see [`add_counts`]), in one pipeline; reload
/// the script and resend, once, the calls that came back `NOSCRIPT`. Returns one value per
/// call (script errors included as `Value::ServerError`), then one per count; `Err` only for
/// connection-level failures.
pub(crate) async fn evalsha_all<C: ConnectionLike, T: ScriptCall>(
    conn: &mut C,
    sha: &str,
    source: &str,
    calls: &[T],
    counts: &[Counted],
) -> RedisResult<Vec<Value>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for call in calls {
        pipe.add_command(call.evalsha(sha));
    }
    add_counts(&mut pipe, counts);
    let mut values: Vec<Value> = pipe.query_async(conn).await?;
    // (Bounded by `calls` too: a reply count mismatch is reported by the caller.)
    let missing: Vec<usize> = (0..values.len().min(calls.len()))
        .filter(|&i| is_noscript(&values[i]))
        .collect();
    if !missing.is_empty() {
        tracing::info!(commands = missing.len(), "redis lost the script; reloading");
        let mut retry = redis::pipe();
        retry.ignore_errors();
        retry.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
        for &i in &missing {
            retry.add_command(calls[i].evalsha(sha));
        }
        let again: Vec<Value> = retry.query_async(conn).await?;
        for (i, v) in missing.into_iter().zip(again) {
            values[i] = v;
        }
    }
    Ok(values)
}

fn is_noscript(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use redis::{Arg, Cmd, Pipeline, RedisFuture, parse_redis_value};

    use super::*;

    /// A server whose script cache lost the script for some calls only (identified by their
    /// nonce): those answer `NOSCRIPT` until a `SCRIPT LOAD` arrives. Records what it ran.
    struct Flaky {
        lost: HashSet<String>,
        loaded: bool,
        ran: Vec<String>,
        round_trips: usize,
    }

    fn args(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    impl Flaky {
        fn answer(&mut self, cmd: &Cmd) -> Value {
            let a = args(cmd);
            if a[0] == "SCRIPT" {
                self.loaded = true;
                return Value::SimpleString("sha".to_owned());
            }
            // EVALSHA sha numkeys k1 ...: calls are told apart by their key.
            let nonce = a[3].clone();
            if self.lost.contains(&nonce) && !self.loaded {
                return parse_redis_value(b"-NOSCRIPT No matching script.\r\n")
                    .unwrap_or(Value::Nil);
            }
            self.ran.push(nonce);
            Value::Array([0, 1, 2, 3, -1, 0, 0].map(Value::Int).to_vec())
        }
    }

    impl ConnectionLike for Flaky {
        fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
            self.round_trips += 1;
            let v = self.answer(cmd);
            Box::pin(async move { Ok(v) })
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            pipeline: &'a Pipeline,
            _offset: usize,
            _count: usize,
        ) -> RedisFuture<'a, Vec<Value>> {
            self.round_trips += 1;
            let v: Vec<Value> = pipeline.cmd_iter().map(|c| self.answer(c)).collect();
            Box::pin(async move { Ok(v) })
        }

        fn get_db(&self) -> i64 {
            0
        }
    }

    fn call(key: &str) -> Invocation {
        // Only the keys matter to the fake connection; the numbers are one fixed_window check.
        let nums = [
            -1.0f64, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1000.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0,
        ];
        Invocation {
            keys: vec![key.to_owned()],
            args: nums.iter().flat_map(|n| n.to_le_bytes()).collect(),
            limits: 1,
            ids: 0,
        }
    }

    #[tokio::test]
    async fn only_the_noscript_calls_are_resent() {
        let mut conn = Flaky {
            lost: ["b", "d"].map(str::to_owned).into(),
            loaded: false,
            ran: Vec::new(),
            round_trips: 0,
        };
        let calls = ["a", "b", "c", "d"].map(call);
        let values = evalsha_all(&mut conn, "sha", "src", &calls, &[])
            .await
            .expect("ok");
        assert_eq!(values.len(), 4);
        assert!(
            values.iter().all(|v| matches!(v, Value::Array(_))),
            "{values:?}"
        );
        assert_eq!(conn.ran, ["a", "c", "b", "d"], "each call ran exactly once");
        assert_eq!(conn.round_trips, 2);
    }

    #[tokio::test]
    async fn one_round_trip_when_the_script_is_there() {
        let mut conn = Flaky {
            lost: HashSet::new(),
            loaded: true,
            ran: Vec::new(),
            round_trips: 0,
        };
        let calls = ["a", "b"].map(call);
        evalsha_all(&mut conn, "sha", "src", &calls, &[])
            .await
            .expect("ok");
        assert_eq!(conn.round_trips, 1);
        assert_eq!(conn.ran, ["a", "b"]);
    }
}
