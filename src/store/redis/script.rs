//! The check script and its wire format: the composed Lua source, key layout, the `ARGV` a
//! check is sent with, and the defensive parsing of the reply. The interface itself is
//! documented in `src/store/lua/header.lua` and `docs/algorithms.md`.

use deadpool_redis::redis::{self, Value};

use crate::limit::{Check, LimitResult, LimitSpec};
use crate::store::StoreError;

/// The whole check script: the header, one file per algorithm, then the protocol. One script,
/// so a check whose limits use different algorithms is one atomic `EVALSHA`.
pub const SCRIPT: &str = concat!(
    include_str!("../lua/header.lua"),
    include_str!("../lua/fixed_window.lua"),
    include_str!("../lua/sliding_window.lua"),
    include_str!("../lua/sliding_log.lua"),
    include_str!("../lua/token_bucket.lua"),
    include_str!("../lua/leaky_bucket.lua"),
    include_str!("../lua/gcra.lua"),
    include_str!("../lua/main.lua"),
);

/// Values per limit in the reply (after the leading `now_ms`).
const REPLY_PER_LIMIT: usize = 6;

/// Key of a limit's state: `<prefix>{<tag>}<suffix>`. The tag is the first (and only) brace
/// pair, so every key of one descriptor hashes to the same cluster slot whatever the
/// descriptor values contain.
pub fn state_key(prefix: &str, tag: &str, spec: &LimitSpec) -> String {
    format!("{prefix}{{{tag}}}{}", spec.identity().suffix())
}

/// Key of a limit's penalty lock: the state key plus `:p`.
pub fn lock_key(prefix: &str, tag: &str, spec: &LimitSpec) -> String {
    let mut k = state_key(prefix, tag, spec);
    k.push_str(":p");
    k
}

/// What one `EVALSHA` of a check carries, independent of the connection it is sent on.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub keys: Vec<String>,
    pub args: Vec<String>,
    /// Number of limits, i.e. results expected back.
    pub limits: usize,
}

/// Per-call arguments shared by every check of one `run()`.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// `Some(now)` in local time mode; `None` lets the script read `TIME`.
    pub now_ms: Option<u64>,
    pub slack_ms: u64,
    pub prefix: &'a str,
}

impl Invocation {
    /// Build the keys and arguments of one check (see `header.lua` for the layout).
    pub fn new(ctx: CallContext<'_>, check: &Check<'_>, nonce: &str) -> Invocation {
        let tag = check.tag.to_base64url();
        let mut keys = Vec::with_capacity(2 * check.limits.len());
        let mut args = Vec::with_capacity(5 + 7 * check.limits.len());
        args.push(ctx.now_ms.map(|n| n.to_string()).unwrap_or_default());
        args.push(check.cost.to_string());
        args.push(if check.refund { "1" } else { "0" }.to_owned());
        args.push(ctx.slack_ms.to_string());
        args.push(nonce.to_owned());
        for spec in check.limits {
            keys.push(state_key(ctx.prefix, &tag, spec));
            keys.push(lock_key(ctx.prefix, &tag, spec));
            args.push(spec.algorithm.code().to_string());
            args.push(spec.requests_per_unit.to_string());
            args.push(spec.window_ms().to_string());
            args.push(spec.capacity().to_string());
            args.push(spec.buckets.to_string());
            args.push(if spec.overdraft { "1" } else { "0" }.to_owned());
            args.push(spec.penalty_ms.to_string());
        }
        Invocation {
            keys,
            args,
            limits: check.limits.len(),
        }
    }

    /// `EVALSHA <sha> <numkeys> KEYS... ARGV...` for pipelines.
    pub fn evalsha(&self, sha: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(sha)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }
}

/// Parse one script reply into `limits` results appended to `out`. Anything but the exact
/// documented shape is a [`StoreError::Backend`]: a reply is never trusted to be well formed.
pub fn parse_reply(
    value: &Value,
    limits: usize,
    out: &mut Vec<LimitResult>,
) -> Result<(), StoreError> {
    let items = match value {
        Value::Array(items) => items,
        Value::ServerError(e) => return Err(StoreError::Backend(format!("script error: {e}"))),
        other => return Err(malformed(format!("expected an array, got {other:?}"))),
    };
    if items.len() != 1 + REPLY_PER_LIMIT * limits {
        return Err(malformed(format!(
            "expected {} values for {limits} limits, got {}",
            1 + REPLY_PER_LIMIT * limits,
            items.len()
        )));
    }
    let mut ints = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::Int(i) => ints.push(*i),
            other => return Err(malformed(format!("expected an integer, got {other:?}"))),
        }
    }
    for chunk in ints[1..].chunks_exact(REPLY_PER_LIMIT) {
        let [ok, remaining, reset, retry, used, penalized] = *chunk else {
            return Err(malformed("short limit entry".to_owned()));
        };
        let flag = |v: i64, what: &str| match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed(format!("{what} = {v}"))),
        };
        let non_negative =
            |v: i64, what: &str| u64::try_from(v).map_err(|_| malformed(format!("{what} = {v}")));
        let retry_ms = match retry {
            -1 => None,
            r => Some(non_negative(r, "retry_ms")?),
        };
        out.push(LimitResult {
            allowed: flag(ok, "ok")?,
            remaining: non_negative(remaining, "remaining")?,
            reset_ms: non_negative(reset, "reset_ms")?,
            retry_ms,
            used_before: non_negative(used, "used_before")?,
            penalized: flag(penalized, "penalized")?,
        });
    }
    Ok(())
}

fn malformed(what: String) -> StoreError {
    StoreError::Backend(format!("malformed script reply: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_malformed_replies() {
        let mut out = Vec::new();
        assert!(parse_reply(&Value::Nil, 1, &mut out).is_err());
        assert!(parse_reply(&Value::Array(vec![Value::Int(1)]), 1, &mut out).is_err());
        let bad_flag = Value::Array([1, 2, 0, 0, -1, 0, 0].map(Value::Int).to_vec());
        assert!(parse_reply(&bad_flag, 1, &mut out).is_err());
        let negative = Value::Array([1, 1, -5, 0, -1, 0, 0].map(Value::Int).to_vec());
        assert!(parse_reply(&negative, 1, &mut out).is_err());
        let text = Value::Array(vec![Value::Int(1), Value::BulkString(b"1".to_vec())]);
        assert!(parse_reply(&text, 0, &mut out).is_err());
        assert!(out.is_empty());
        let good = Value::Array([7, 0, 0, 10, 3, 4, 1].map(Value::Int).to_vec());
        parse_reply(&good, 1, &mut out).expect("well-formed reply");
        assert_eq!(
            out,
            vec![LimitResult {
                allowed: false,
                remaining: 0,
                reset_ms: 10,
                retry_ms: Some(3),
                used_before: 4,
                penalized: true,
            }]
        );
    }
}
