//! The vocabulary of limits, shared by `config`, `store` and `limiter`, and depending on
//! none of them: what a limit is ([`LimitSpec`], [`Unit`], [`Algorithm`]), whose state it
//! counts ([`StateTag`]), what a store is asked ([`Check`]) and answers ([`LimitResult`]),
//! the clock, calendar windows ([`Calendar`]), the native algorithms, a request descriptor
//! written as text ([`Descriptor`], the operator tools' `k=v,k2=v2`), the one sharded map
//! (`sharded`), the one hasher of tags and ids (`hash`) and the one source of random numbers
//! (`random`).
//!
//! The algorithm semantics are defined once in `docs/explanation/algorithms.md`; [`algorithm`]
//! implements them natively (memory store) and `src/store/lua/*.lua` in Redis. Nothing here
//! does I/O.
//!
//! This file is the shared vocabulary itself, one small type per word; files of their own
//! would scatter what every layer reads together.

pub mod algorithm;
pub mod calendar;
pub mod clock;
pub mod descriptor;
pub mod hash;
pub mod random;
pub mod sharded;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

pub use calendar::{Calendar, Periods};
pub use clock::{Clock, ManualClock, SystemClock};
pub use descriptor::{Descriptor, parse_bucket, parse_descriptor};

/// A window length as envoyproxy/ratelimit defines it: epoch-aligned, week = 7 days,
/// month = 30 days, year = 365 days (a limit with a [`Calendar`] counts the calendar's days,
/// weeks, months and years instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// Window length in seconds (their `UnitToDivider`).
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 604_800,
            Unit::Month => 2_592_000,
            Unit::Year => 31_536_000,
        }
    }

    pub const fn millis(self) -> u64 {
        self.seconds() * 1000
    }

    /// Upper-case name as in the proto enum and envoyproxy/ratelimit's `/rlconfig`.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }

    /// Case-insensitive parse of a rule file's `unit` (their `strings.ToUpper` lookup).
    pub fn parse(s: &str) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The algorithms, one row each: variant, code, name in rule files, family, whether
/// `overdraft` is on by default, whether `batched` may decide it. Everything that must know
/// every algorithm matches on [`Algorithm`] exhaustively or walks [`Algorithm::ALL`]; the Lua
/// code table (`store/lua/header.lua`) is held to this one by a test
/// (`integration/architecture/algorithms.rs`). Adding one: ARCHITECTURE.md, "Add an
/// algorithm".
///
/// - code: used in Redis keys and as the Lua dispatch number, part of the state identity:
///   never renumbered, never reused.
/// - overdraft: envoyproxy/ratelimit charges every hit of a fixed window, allowed or not;
///   the other algorithms charge only admitted hits.
/// - batched: the batch charges a key's hits at once, at flush time, with overdraft. A
///   `sliding_log` records each admitted hit's own time and takes no overdraft, so a batch
///   would misplace every hit in its log; every other algorithm keeps counts (or a level)
///   that a sum of hits charges exactly.
macro_rules! algorithms {
    ($($(#[$m:meta])* $v:ident = $code:literal, $name:literal, $family:ident, $overdraft:literal, $batched:literal;)+) => {
        /// The algorithm a limit runs. Semantics: `docs/explanation/algorithms.md`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub enum Algorithm {
            $($(#[$m])* $v),+
        }

        impl Algorithm {
            pub const ALL: [Algorithm; [$($code),+].len()] = [$(Algorithm::$v),+];

            /// Name as written in rule files.
            pub const fn name(self) -> &'static str {
                match self { $(Algorithm::$v => $name),+ }
            }

            /// Code in Redis keys and the Lua dispatch.
            pub const fn code(self) -> u8 {
                match self { $(Algorithm::$v => $code),+ }
            }

            pub const fn family(self) -> Family {
                match self { $(Algorithm::$v => Family::$family),+ }
            }

            /// Default of the `overdraft` option.
            pub const fn default_overdraft(self) -> bool {
                match self { $(Algorithm::$v => $overdraft),+ }
            }

            /// Whether `consistency: batched` may decide it.
            pub const fn batchable(self) -> bool {
                match self { $(Algorithm::$v => $batched),+ }
            }
        }
    };
}

algorithms! {
    #[default]
    FixedWindow   = 1, "fixed_window",   Counts, true,  true;
    SlidingWindow = 2, "sliding_window", Counts, false, true;
    SlidingLog    = 3, "sliding_log",    Counts, false, false;
    TokenBucket   = 4, "token_bucket",   Level,  false, true;
    LeakyBucket   = 5, "leaky_bucket",   Level,  false, true;
    Gcra          = 6, "gcra",           Level,  false, true;
}

/// How an algorithm keeps a limit's usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Requests counted in windows or a log: `fixed_window`, `sliding_window`, `sliding_log`.
    Counts,
    /// A scaled level that drains at the rate, up to `burst`: the buckets.
    Level,
}

impl Algorithm {
    pub fn parse(s: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == s)
    }

    /// `burst` means something only for the bucket family.
    pub const fn has_burst(self) -> bool {
        match self.family() {
            Family::Level => true,
            Family::Counts => false,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a rule's descriptors are decided (`consistency` in rule files, `--consistency`):
/// every hit by the store, or from this instance's local view with hits sent to the store
/// in batches (`docs/how-to/choose-consistency.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Consistency {
    #[default]
    Strict,
    Batched,
}

impl Consistency {
    pub const fn name(self) -> &'static str {
        match self {
            Consistency::Strict => "strict",
            Consistency::Batched => "batched",
        }
    }

    pub fn parse(s: &str) -> Option<Consistency> {
        [Consistency::Strict, Consistency::Batched]
            .into_iter()
            .find(|c| c.name() == s)
    }

    /// Whether `batched` is sound for `algorithm` ([`Algorithm::batchable`]).
    pub const fn sound_for(algorithm: Algorithm) -> bool {
        algorithm.batchable()
    }
}

/// Default number of sub-windows of a `sliding_window`.
pub const DEFAULT_BUCKETS: u32 = 10;
/// Allowed `buckets` range.
pub const BUCKETS_RANGE: std::ops::RangeInclusive<u32> = 2..=1000;
/// Largest `requests_per_unit` a `sliding_log` accepts: the log keeps one run per distinct
/// millisecond with admitted hits (about 60 bytes each in Redis), so this caps a key at
/// roughly 0.6 MB.
pub const SLIDING_LOG_MAX: u64 = 10_000;
/// A `sliding_log` or `sliding_window` refund takes from at most this many of the newest runs
/// (distinct timestamps / sub-windows), so its work is bounded whatever its cost
/// (docs/explanation/algorithms.md).
pub const SLIDING_LOG_REFUND_RUNS: usize = 64;
/// Longest window a limit may have (`unit × unit_multiplier`): 100 years of 365 days, in
/// seconds. Far beyond any useful window, and it keeps every window in `u32` seconds and
/// every `now + W` exact in Lua's doubles.
pub const MAX_WINDOW_SECONDS: u64 = 100 * Unit::Year.seconds();
/// Largest `capacity × unit` (in request-milliseconds) for which the bucket algorithms'
/// integer arithmetic stays exact in Redis Lua's doubles (2^53).
pub const MAX_EXACT_SCALED: u64 = 1 << 53;
/// Largest `requests_per_unit`, `burst` and `hits_addend`: 2^53 = 9 007 199 254 740 992, the
/// largest count every store keeps exact (Redis Lua's numbers are doubles). A budget of
/// tokens fits many times over (30 billion a month is 2^35).
pub const MAX_BUDGET: u64 = MAX_EXACT_SCALED;

/// A count as the protocol's `uint32` fields carry it (`current_limit.requests_per_unit`,
/// `limit_remaining`): clamped at 4 294 967 295. Decision metadata, `/state` and `explain`
/// carry the exact count.
pub fn wire_count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One configured limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitSpec {
    /// At most [`MAX_BUDGET`].
    pub requests_per_unit: u64,
    pub unit: Unit,
    /// The window is this many units (`unit_multiplier`, at least 1): `unit: minute`,
    /// `unit_multiplier: 5` is `requests_per_unit` per 5 minutes. Config keeps
    /// `unit × unit_multiplier` within [`MAX_WINDOW_SECONDS`].
    pub unit_multiplier: u32,
    pub algorithm: Algorithm,
    /// Capacity of `token_bucket`, `leaky_bucket`, `gcra` (defaults to `requests_per_unit`).
    /// Equals `requests_per_unit` for the window algorithms.
    pub burst: u64,
    /// Sub-windows of a `sliding_window`; 0 for every other algorithm.
    pub buckets: u32,
    /// Charge every hit, allowed or not.
    pub overdraft: bool,
    /// After a denial, deny every hit for this long without touching counters. 0 = off.
    pub penalty_ms: u64,
    /// `rate_limit.name`, reported in `current_limit.name` and the target of `replaces`.
    pub name: Option<Arc<str>>,
    /// Position in the rule's `rate_limits` list (0 for `rate_limit`): part of the state
    /// identity so two limits of one descriptor never share state.
    pub slot: u8,
    /// `calendar`: the windows are the periods of `unit × unit_multiplier` in this zone's
    /// calendar (config allows it for day, week, month and year with `fixed_window` and
    /// `sliding_window`); `None`: epoch-aligned windows of `W`.
    pub calendar: Option<Calendar>,
}

impl LimitSpec {
    /// `algorithm` at `requests_per_unit` per `unit` with the defaults a rule file gives it:
    /// `burst` the rate, [`DEFAULT_BUCKETS`] sub-windows for a `sliding_window`, the
    /// algorithm's default overdraft, no penalty, no name, slot 0, no calendar.
    pub fn new(algorithm: Algorithm, requests_per_unit: u64, unit: Unit) -> LimitSpec {
        LimitSpec {
            requests_per_unit,
            unit,
            unit_multiplier: 1,
            algorithm,
            burst: requests_per_unit,
            buckets: if algorithm == Algorithm::SlidingWindow {
                DEFAULT_BUCKETS
            } else {
                0
            },
            overdraft: algorithm.default_overdraft(),
            penalty_ms: 0,
            name: None,
            slot: 0,
            calendar: None,
        }
    }

    /// The limit a request `limit` override (RateLimitOverride) asks for: their semantics,
    /// a fixed window.
    pub fn fixed_window(requests_per_unit: u64, unit: Unit) -> LimitSpec {
        LimitSpec::new(Algorithm::FixedWindow, requests_per_unit, unit)
    }

    /// `C` of `docs/explanation/algorithms.md`: the most usage a key may hold.
    pub fn capacity(&self) -> u64 {
        if self.algorithm.has_burst() {
            self.burst
        } else {
            self.requests_per_unit
        }
    }

    /// The calendar periods around `now_ms` of a calendar limit (`None` for epoch-aligned
    /// windows).
    pub fn periods(&self, now_ms: u64) -> Option<Periods> {
        let c = self.calendar.as_ref()?;
        Some(c.periods(self.unit, self.unit_multiplier, now_ms))
    }

    /// `W` of `docs/explanation/algorithms.md` in seconds: `unit × unit_multiplier` (a multiplier of 0,
    /// which config never produces, reads as 1). A calendar limit's periods vary around this
    /// nominal length (a month of 30 days): its own are [`LimitSpec::periods`].
    pub fn window_seconds(&self) -> u64 {
        self.unit
            .seconds()
            .saturating_mul(u64::from(self.unit_multiplier.max(1)))
    }

    /// `W` in milliseconds.
    pub fn window_ms(&self) -> u64 {
        self.window_seconds().saturating_mul(1000)
    }

    /// The window in words: `minute`, `5 minutes`, `calendar month in Asia/Kolkata`.
    pub fn window_name(&self) -> String {
        let unit = self.unit.name().to_ascii_lowercase();
        let window = match self.unit_multiplier {
            0 | 1 => unit,
            m => format!("{m} {unit}s"),
        };
        match &self.calendar {
            Some(c) => format!("calendar {window} in {}", c.zone()),
            None => window,
        }
    }

    /// The limit as a protocol `RateLimit` can state it (`requests_per_unit` of one whole
    /// unit, for `current_limit`). A single unit is reported as configured. A window of
    /// several units is reported as the same rate, exactly: a window that is itself a unit
    /// (`minute × 60` → `HOUR`) keeps `requests_per_unit`; otherwise the smallest unit, from
    /// the configured one up, in which the rate is a whole number (100 per 5 minutes → 20
    /// per `MINUTE`, 1000 per 6 hours → 4000 per `DAY`). When no unit makes it whole, the
    /// configured unit with the rate rounded down, at least 1 (`docs/reference/limits.md`,
    /// "Windows of N units"). A calendar window is reported in its unit (a calendar month is a
    /// `MONTH`). The protocol's field is a `uint32`: the service clamps what this returns.
    pub fn reported(&self) -> (u64, Unit) {
        let (rpu, w) = (self.requests_per_unit, self.window_seconds());
        if self.unit_multiplier <= 1 {
            return (self.requests_per_unit, self.unit);
        }
        if let Some(u) = Unit::ALL.into_iter().find(|u| u.seconds() == w) {
            return (self.requests_per_unit, u);
        }
        let exact = Unit::ALL
            .into_iter()
            .filter(|u| u.seconds() >= self.unit.seconds())
            .find_map(|u| {
                let scaled = u128::from(rpu) * u128::from(u.seconds());
                let whole = scaled % u128::from(w) == 0;
                let n = u64::try_from(scaled / u128::from(w)).ok()?;
                whole.then_some((n, u))
            });
        exact.unwrap_or_else(|| {
            let n = rpu / u64::from(self.unit_multiplier);
            let n = if rpu > 0 { n.max(1) } else { 0 };
            (n, self.unit)
        })
    }

    /// What distinguishes this limit's state from any other limit's state on the same
    /// descriptor: algorithm, window length, buckets and slot. `requests_per_unit` and
    /// `burst` are deliberately absent, so changing them keeps the state (ARCHITECTURE.md,
    /// "State identity" under "Invariants"); the window is its length, so `unit_multiplier`
    /// is part of it and one hour keeps its state whether written `hour` or `minute × 60`. A
    /// calendar window is its unit, multiplier and zone: never the state of an epoch-aligned
    /// window of any length.
    pub fn identity(&self) -> StateIdentity {
        StateIdentity {
            algorithm: self.algorithm,
            window_seconds: self.window_seconds(),
            buckets: self.buckets,
            slot: self.slot,
            calendar: self
                .calendar
                .as_ref()
                .map(|c| (self.unit, self.unit_multiplier.max(1), c.clone())),
        }
    }

    /// A fingerprint of every parameter of `limits` that a decision reads (not the name): an
    /// answer kept in memory for one limit list (the over-limit cache's denials, the local
    /// view's state) is only used for the same list, so a reload or another request override
    /// starts over. The one definition both keep, so they change together.
    pub fn fingerprint(limits: &[LimitSpec]) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for l in limits {
            h.update(&[l.algorithm.code(), l.slot, u8::from(l.overdraft)]);
            h.update(&l.requests_per_unit.to_le_bytes());
            h.update(&l.burst.to_le_bytes());
            h.update(&l.buckets.to_le_bytes());
            h.update(&l.window_ms().to_le_bytes());
            h.update(&l.penalty_ms.to_le_bytes());
            let zone = l.calendar.as_ref().map_or("", Calendar::zone);
            h.update(&(zone.len() as u64).to_le_bytes());
            h.update(zone.as_bytes());
        }
        h.digest()
    }
}

/// See [`LimitSpec::identity`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StateIdentity {
    pub algorithm: Algorithm,
    /// `unit × unit_multiplier` in seconds (with a multiplier of 1, the unit's seconds: keys
    /// written before `unit_multiplier` existed keep their names).
    pub window_seconds: u64,
    pub buckets: u32,
    pub slot: u8,
    /// A calendar window's unit, multiplier and zone (which replace the window's length).
    pub calendar: Option<(Unit, u32, Calendar)>,
}

impl StateIdentity {
    /// Stable key suffix, e.g. `:4:60:0:0` (algorithm code, window seconds, buckets, slot);
    /// a calendar window names itself instead of its length: `:1:month@Asia/Kolkata:0:0`,
    /// `:2:3month@UTC:10:0`.
    pub fn suffix(&self) -> String {
        let code = self.algorithm.code();
        let (buckets, slot) = (self.buckets, self.slot);
        match &self.calendar {
            Some((unit, m, c)) => {
                let unit = unit.name().to_ascii_lowercase();
                let m = if *m > 1 { m.to_string() } else { String::new() };
                format!(":{code}:{m}{unit}@{}:{buckets}:{slot}", c.zone())
            }
            None => format!(":{code}:{}:{buckets}:{slot}", self.window_seconds),
        }
    }

    /// The window part of the identity as one number, for stores that key by numbers (the
    /// memory store): the length in seconds, or for a calendar window a hash of its unit,
    /// multiplier and zone with the top bit set (no length reaches it).
    pub fn window_key(&self) -> u64 {
        match &self.calendar {
            Some((unit, m, c)) => {
                let mut h = xxhash_rust::xxh3::Xxh3::new();
                h.update(unit.name().as_bytes());
                h.update(&m.to_le_bytes());
                h.update(c.zone().as_bytes());
                h.digest() | 1 << 63
            }
            None => self.window_seconds,
        }
    }
}

/// 128-bit identity of a descriptor's state: a hash of the domain and the ordered entries
/// (with `share_threshold` patterns in place of values). Encoded length-prefixed, so
/// `(a, b_c)` and `(a_b, c)` never collide whatever bytes values contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateTag(pub u128);

impl StateTag {
    /// Over the raw bytes of keys and values: two different values never share a tag,
    /// whether or not they are UTF-8.
    pub fn compute<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        domain: &str,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> StateTag {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut part = |s: &[u8]| {
            h.update(&(s.len() as u64).to_le_bytes());
            h.update(s);
        };
        part(domain.as_bytes());
        for (k, v) in entries {
            part(k.as_ref());
            part(v.as_ref());
        }
        StateTag(h.digest128())
    }

    /// 22-character base64url form used inside Redis hash tags (`{...}`): never contains
    /// `{` or `}`, so a descriptor value can never move the slot.
    pub fn to_base64url(self) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let bytes = self.0.to_be_bytes();
        let mut out = String::with_capacity(22);
        let mut acc: u32 = 0;
        let mut bits = 0;
        for b in bytes {
            acc = (acc << 8) | u32::from(b);
            bits += 8;
            while bits >= 6 {
                bits -= 6;
                out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
            }
        }
        if bits > 0 {
            out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
        }
        out
    }
}

/// What one request descriptor asks of the store: its state tag, the limits of the rule it
/// matched, and its cost.
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    pub tag: StateTag,
    pub limits: &'a [LimitSpec],
    /// Hits to charge (0 = peek: decide without changing state).
    pub cost: u64,
    /// `is_negative_hits`: give `cost` back instead of charging it. Always allowed.
    pub refund: bool,
}

/// How the checks of one request are charged together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Charge {
    /// Each check by its own decision (docs/explanation/algorithms.md "One check").
    #[default]
    Each,
    /// envoyproxy/ratelimit's `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`: when any check of the
    /// request is denied, no admitted check of it is charged; denied checks follow their own
    /// rules (overdraft limits are charged, penalties lock).
    StopWhenOver,
    /// As [`Charge::StopWhenOver`], with a denial already known for this request (a check
    /// answered from the local over-limit cache): no admitted check is charged.
    Held,
}

/// The store's answer for one limit of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LimitResult {
    /// This limit admits the hit (it may still be uncharged if another limit of the same
    /// descriptor denied it).
    pub allowed: bool,
    /// `clamp(C − U, 0, ∞)` after the hit; 0 when denied.
    pub remaining: u64,
    /// Milliseconds until usage is back to 0 (`fixed_window`: until the window ends).
    pub reset_ms: u64,
    /// When denied: milliseconds until this same hit would be allowed. `None` when it never
    /// can be (cost larger than capacity). Always `None` when allowed.
    pub retry_ms: Option<u64>,
    /// Usage before this hit, rounded up to whole hits (for near/over-limit statistics).
    pub used_before: u64,
    /// Denied by an active penalty (`penalty_seconds`), counters untouched.
    pub penalized: bool,
}
