//! The check script and its wire format: the composed Lua source, key layout, the `ARGV` a
//! check is sent with, and the defensive parsing of the reply. The interface itself is
//! documented in `src/store/lua/header.lua` and `docs/explanation/algorithms.md`.

use std::sync::LazyLock;

use redis::{self, Value};

use crate::limit::{Algorithm, Check, LimitResult, LimitSpec, MAX_BUDGET, Periods};
use crate::store::{Context, StoreError};

/// The whole check script: the header, the algorithm files, then the protocol. One script,
/// so a request whose limits use different algorithms is one atomic `EVALSHA`.
pub const SCRIPT: &str = concat!(
    include_str!("../lua/header.lua"),
    include_str!("../lua/fixed_window.lua"),
    include_str!("../lua/sliding_window.lua"),
    include_str!("../lua/runs.lua"),
    include_str!("../lua/token_bucket.lua"),
    include_str!("../lua/leaky_bucket.lua"),
    include_str!("../lua/gcra.lua"),
    include_str!("../lua/main.lua"),
);

/// The line of `header.lua` that tells Redis 7+ (which has `PEXPIRE ... NX`) from older
/// servers.
const V7_LINE: &str = "local V7 = redis.REDIS_VERSION_NUM ~= nil";

/// [`SCRIPT`] with that detection replaced by `false`: the fixed-window path then takes its
/// Redis < 7 branch (`HLEN` instead of `PEXPIRE ... NX`) on any server. Tests only: the test
/// machine runs Redis 7, which would never take that branch otherwise (see
/// [`super::RedisStore::new_forcing_pre_redis7`]). Built on first use, never by production.
pub fn pre_redis7_script() -> &'static str {
    static SOURCE: LazyLock<String> =
        LazyLock::new(|| SCRIPT.replacen(V7_LINE, "local V7 = false", 1));
    &SOURCE
}

/// Values per limit in the reply (after the leading `now_ms`).
pub(super) const REPLY_PER_LIMIT: usize = 6;

/// Key of a limit's state: `<prefix>{<tag>}<suffix>`, plus a name of its layout where that
/// changed: `:h` for a `fixed_window` (a hash since that layout), `:s` for a
/// `sliding_window` (one string) and `:r` for a `sliding_log` (runs whose newest member caches
/// the oldest) since their cheaper layouts. A key of an earlier layout is left to expire, and two releases
/// sharing a Redis during an upgrade never read each other's keys (no `WRONGTYPE`, no
/// misread count). The tag is the first (and only) brace pair, so every key of one
/// descriptor hashes to the same cluster slot whatever the descriptor values contain.
pub fn state_key(prefix: &str, tag: &str, spec: &LimitSpec) -> String {
    let layout = match spec.algorithm {
        Algorithm::FixedWindow => ":h",
        Algorithm::SlidingWindow => ":s",
        Algorithm::SlidingLog => ":r",
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => "",
    };
    format!("{prefix}{{{tag}}}{}{layout}", spec.identity().suffix())
}

/// Key of a limit's penalty lock: the state key plus `:p`.
pub fn lock_key(prefix: &str, tag: &str, spec: &LimitSpec) -> String {
    let mut k = state_key(prefix, tag, spec);
    k.push_str(":p");
    k
}

/// Key of the id of call `call` (its index among the calls of one identified store call)
/// under `id`: in the hash slot of `tag`, the call's first check, so on a cluster it lives
/// beside the state it guards. Sending the same checks again under the same id gives the
/// same calls, hence the same keys.
pub fn id_key(prefix: &str, tag: &str, id: u64, call: usize) -> String {
    format!("{prefix}{{{tag}}}:id:{id:016x}:{call}")
}

/// The id of one call: its key ([`id_key`]) and how long Redis keeps it.
#[derive(Debug, Clone)]
pub struct IdKey {
    pub key: String,
    pub ttl_ms: u64,
}

/// What one `EVALSHA` carries: the checks of one request (or of one cluster slot of it),
/// independent of the connection it is sent on.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The state keys of every check, then the id keys of its segments (`ids` of them).
    pub keys: Vec<String>,
    /// `ARGV[1]`: the call's numbers as little-endian `f64`s (see `header.lua`).
    pub args: Vec<u8>,
    /// Number of limits over all its checks, i.e. results expected back.
    pub limits: usize,
    /// Id keys at the end of `keys`.
    pub ids: usize,
}

/// Per-call arguments shared by every call of one `run()`.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// `Some(now)` in local time mode; `None` lets the script read `TIME`.
    pub now_ms: Option<u64>,
    /// This instance's clock: calendar limits send the periods around it, and the script
    /// counts in the one holding its own now (`header.lua`).
    pub calendar_ms: u64,
    pub slack_ms: u64,
    pub prefix: &'a str,
}

/// How a call charges its checks together (the mode of `header.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each check by its own decision.
    Each,
    /// Stop-increment: when any check of the call is denied, no admitted check is charged.
    Stop,
    /// Stop-increment, and the request already has a denied check: no admitted check is
    /// charged.
    Held,
    /// Decide and report; write nothing.
    Dry,
}

impl Mode {
    pub(super) fn arg(self) -> f64 {
        match self {
            Mode::Each => 0.0,
            Mode::Stop => 1.0,
            Mode::Held => 2.0,
            Mode::Dry => 3.0,
        }
    }
}

/// The first seven numbers the script reads of one limit, in its order: code, R, W, C, B,
/// overdraft, penalty_ms (the eighth, Z, says where its calendar's are: [`push_group`]).
///
/// Every value is an integer of at most 2^53 (config's bounds), exact in an `f64`.
#[allow(clippy::cast_precision_loss)]
fn limit_numbers(spec: &LimitSpec) -> [f64; 7] {
    [
        f64::from(spec.algorithm.code()),
        spec.requests_per_unit as f64,
        spec.window_ms() as f64,
        spec.capacity() as f64,
        f64::from(spec.buckets),
        if spec.overdraft { 1.0 } else { 0.0 },
        spec.penalty_ms as f64,
    ]
}

/// Two limit lists with the same numbers (and calendar periods) share a group in a call.
fn same_numbers(a: &[LimitSpec], b: &[LimitSpec], calendar_ms: u64) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            limit_numbers(x) == limit_numbers(y) && x.periods(calendar_ms) == y.periods(calendar_ms)
        })
}

/// Numbers per limit in a group, and per calendar after them.
pub(super) const PER_LIMIT: usize = 8;
pub(super) const PER_CALENDAR: usize = 6;

/// One group (`header.lua`): k, then 8 numbers per limit (the 8th, Z, 0 or the distance to
/// its calendar's numbers), then 6 per calendar limit: the number of its first period and
/// the five boundaries (`Periods`).
#[allow(clippy::cast_precision_loss)]
fn push_group(limits: &[LimitSpec], calendar_ms: u64, put: &mut impl FnMut(f64)) {
    let k = limits.len();
    put(k as f64);
    let periods: Vec<Option<Periods>> = limits.iter().map(|l| l.periods(calendar_ms)).collect();
    let mut next_calendar = 0;
    for (i, (spec, p)) in limits.iter().zip(&periods).enumerate() {
        limit_numbers(spec).into_iter().for_each(&mut *put);
        // From this limit's numbers (its code at 1) to its calendar's (their first at 1).
        let z = p.map_or(0, |_| {
            next_calendar += 1;
            PER_LIMIT * (k - i) + PER_CALENDAR * (next_calendar - 1)
        });
        put(z as f64);
    }
    for p in periods.into_iter().flatten() {
        put(p.first as f64);
        p.bounds.into_iter().for_each(|b| put(b as f64));
    }
}

/// The numbers of a group: what [`push_group`] writes (`1 + 8k + 6·calendars`).
pub(super) fn group_len(limits: &[LimitSpec]) -> usize {
    1 + PER_LIMIT * limits.len()
        + PER_CALENDAR * limits.iter().filter(|l| l.calendar.is_some()).count()
}

/// A cost as the script gets it: exact up to 2^53; anything above (denied by every limit,
/// which holds at most 2^53, and charged or refunded as 2^53 by saturation) as 2^54, so no
/// rounding can bring it down to a capacity (2^53 + 1 would round to 2^53).
#[allow(clippy::cast_precision_loss)]
fn cost_number(cost: u64) -> f64 {
    if cost > MAX_BUDGET {
        (2 * MAX_BUDGET) as f64
    } else {
        cost as f64
    }
}

impl Invocation {
    /// Build the keys and the packed numbers of one call over `checks` (see `header.lua` for
    /// the layout): a lock key only for the limits with a penalty; the checks of one rule
    /// (equal limit lists) share one group of parameters. With `id`, the call is one
    /// identified segment: applied at most once however often it is sent.
    #[allow(clippy::cast_precision_loss)]
    pub fn new<'c>(
        ctx: CallContext<'_>,
        mode: Mode,
        checks: impl Iterator<Item = &'c Check<'c>> + Clone,
        id: Option<IdKey>,
    ) -> Invocation {
        let mut limits = 0;
        let mut groups: Vec<&[LimitSpec]> = Vec::with_capacity(1);
        let mut of_check: Vec<usize> = Vec::with_capacity(4);
        for check in checks.clone() {
            limits += check.limits.len();
            let g = match groups
                .iter()
                .position(|g| same_numbers(g, check.limits, ctx.calendar_ms))
            {
                Some(g) => g,
                None => {
                    groups.push(check.limits);
                    groups.len() - 1
                }
            };
            of_check.push(g);
        }
        let count = 5
            + 2 * usize::from(id.is_some())
            + groups.iter().map(|g| group_len(g)).sum::<usize>()
            + 2 * of_check.len();
        // The numbers go straight into the one packed argument, little-endian doubles.
        let mut args = Vec::with_capacity(8 * count);
        let mut put = |n: f64| args.extend_from_slice(&n.to_le_bytes());
        put(ctx.now_ms.map_or(-1.0, |n| n as f64));
        put(ctx.slack_ms as f64);
        put(mode.arg());
        put(groups.len() as f64);
        for g in &groups {
            push_group(g, ctx.calendar_ms, &mut put);
        }
        match &id {
            Some(id) => {
                put(1.0);
                put(of_check.len() as f64);
                put(id.ttl_ms as f64);
            }
            None => put(0.0),
        }
        let mut keys = Vec::with_capacity(limits + 2);
        for (check, g) in checks.zip(of_check) {
            let group = (g + 1) as f64;
            put(cost_number(check.cost));
            put(if check.refund { -group } else { group });
            let tag = check.tag.to_base64url();
            for spec in check.limits {
                let key = state_key(ctx.prefix, &tag, spec);
                if spec.penalty_ms > 0 {
                    let mut lock = key.clone();
                    lock.push_str(":p");
                    keys.push(key);
                    keys.push(lock);
                } else {
                    keys.push(key);
                }
            }
        }
        let ids = usize::from(id.is_some());
        keys.extend(id.map(|id| id.key));
        Invocation {
            keys,
            args,
            limits,
            ids,
        }
    }
}

/// The Redis Cluster slot of a state tag (every key of a descriptor hashes to it): CRC16
/// (XMODEM) of the hash tag's content, modulo 16384.
pub fn slot(tag_base64url: &str) -> u16 {
    let mut crc: u16 = 0;
    for &b in tag_base64url.as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
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
        Value::ServerError(e) => {
            return Err(StoreError::Backend(Context::cause(
                "script error",
                e.clone(),
            )));
        }
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
    StoreError::Backend(format!("malformed script reply: {what}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pre_redis7_script_differs_only_in_the_version_test() {
        // Exactly one detection line, so the replacement cannot miss it (a missed one would
        // leave the forced store on the Redis 7 branch, testing nothing).
        assert_eq!(SCRIPT.matches(V7_LINE).count(), 1);
        let old = pre_redis7_script();
        assert!(!old.contains(V7_LINE));
        assert_eq!(old.replacen("local V7 = false", V7_LINE, 1), SCRIPT);
    }

    #[test]
    fn slots_match_redis() {
        // CLUSTER KEYSLOT of "123456789" is 12739 (the CRC16 check value 0x31C3).
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot(""), 0);
    }

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
