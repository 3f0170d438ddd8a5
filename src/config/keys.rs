//! Pass 1: the key walk (envoyproxy/ratelimit's `validateYamlKeys`), made positional.
//!
//! Their checks, with their messages: map keys must be strings, keys must be known, every
//! list element must be a map, leaves must be string/int/bool/null, and nothing under
//! `metadata` is looked at. Ours on top: a known key is accepted only at the level it
//! belongs to, and a key may not repeat within one map. Errors are raised at the offending
//! node so serde_yaml stamps its position; those the walk can go on after (everything but
//! the top level's shape, YAML tags and the alias budget) are `Ctx::problem`s, so the
//! walk, run again, reports the next one (`super::parse_file` runs it until none is left).
//!
//! The walk is one serde pass with a seed and visitor per node kind (top level, map key,
//! value, list element), kept in one file: apart, they would hide how levels nest.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::yaml::{ALIAS_BUDGET, Ctx, GoValue, Seg};

super::yaml::seed_from_any!(TopSeed<'_>, KeySeed<'_, '_>, Walk<'_>, Element<'_>);

/// Where in the schema a map sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Root,
    Descriptor,
    RateLimit,
    Replaces,
    /// A descriptor's `response` (sluice extension).
    Response,
    /// A limit's `calendar` (sluice extension).
    Calendar,
    /// Under a key whose value should not be a map at all: only their flat check applies
    /// (the typed pass then reports the wrong shape).
    Any,
}

const ROOT_KEYS: &[&str] = &["domain", "descriptors"];
const DESCRIPTOR_KEYS: &[&str] = &[
    "key",
    "value",
    "rate_limit",
    "rate_limits",
    "descriptors",
    "shadow_mode",
    "quota_mode",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
    "consistency",
    "response",
];
const RATE_LIMIT_KEYS: &[&str] = &[
    "requests_per_unit",
    "unit",
    "unlimited",
    "name",
    "replaces",
    "algorithm",
    "burst",
    "buckets",
    "overdraft",
    "penalty_seconds",
    "unit_multiplier",
    "calendar",
];
const REPLACES_KEYS: &[&str] = &["name"];
const CALENDAR_KEYS: &[&str] = &["time_zone"];
const RESPONSE_KEYS: &[&str] = &[
    "raw_body",
    "content_type",
    "headers",
    "hidden",
    "hide_current_limit",
];

impl Level {
    fn keys(self) -> &'static [&'static str] {
        match self {
            Level::Root => ROOT_KEYS,
            Level::Descriptor => DESCRIPTOR_KEYS,
            Level::RateLimit => RATE_LIMIT_KEYS,
            Level::Replaces => REPLACES_KEYS,
            Level::Response => RESPONSE_KEYS,
            Level::Calendar => CALENDAR_KEYS,
            Level::Any => &[],
        }
    }

    fn place(self) -> &'static str {
        match self {
            Level::Root => "at the top level",
            Level::Descriptor => "in a descriptor",
            Level::RateLimit => "in rate_limit",
            Level::Replaces => "in a replaces entry",
            Level::Response => "in response",
            Level::Calendar => "in calendar",
            Level::Any => "here",
        }
    }

    /// What the value under `key` should be.
    fn child(self, key: &str) -> Expect {
        match (self, key) {
            (Level::Root | Level::Descriptor, "descriptors") => Expect::List(Level::Descriptor),
            (Level::Descriptor, "rate_limit") => Expect::Map(Level::RateLimit),
            (Level::Descriptor, "rate_limits") => Expect::List(Level::RateLimit),
            (Level::Descriptor, "metadata") => Expect::Skip,
            (Level::Descriptor, "response") => Expect::Map(Level::Response),
            // Header names are the operator's: the typed pass checks the map's shape and
            // validation the names.
            (Level::Response, "headers") => Expect::Skip,
            (Level::RateLimit, "replaces") => Expect::List(Level::Replaces),
            (Level::RateLimit, "calendar") => Expect::Map(Level::Calendar),
            (Level::Any, _) => Expect::Any,
            _ => Expect::Scalar,
        }
    }
}

/// Every level's keys (a `replaces` entry's `name` is a rate limit's too).
const ALL_KEYS: [&[&str]; 5] = [
    ROOT_KEYS,
    DESCRIPTOR_KEYS,
    RATE_LIMIT_KEYS,
    RESPONSE_KEYS,
    CALENDAR_KEYS,
];

/// The schema's own spelling of a known key (document paths hold `&'static str`).
pub(super) fn static_key(key: &str) -> Option<&'static str> {
    ALL_KEYS
        .iter()
        .find_map(|set| set.iter().find(|k| **k == key).copied())
}

fn known(key: &str) -> bool {
    ALL_KEYS.iter().any(|set| set.contains(&key))
}

/// Where a known key belongs, for the wrong-level message.
fn home(key: &str) -> &'static str {
    if key == "name" {
        "in rate_limit or a replaces entry"
    } else if ROOT_KEYS.contains(&key) && key != "descriptors" {
        "at the top level"
    } else if DESCRIPTOR_KEYS.contains(&key) {
        "in a descriptor"
    } else if RESPONSE_KEYS.contains(&key) {
        "in a descriptor's response"
    } else if CALENDAR_KEYS.contains(&key) {
        "in a rate limit's calendar"
    } else {
        "in rate_limit"
    }
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Map(Level),
    List(Level),
    Scalar,
    Skip,
    Any,
}

/// Walk the whole first document. `Ok` means the keys are fine.
pub(super) fn check(content: &str, ctx: &Ctx) -> Result<(), serde_yaml::Error> {
    match super::yaml::first_document(content) {
        Some(doc) => TopSeed { ctx }.deserialize(doc),
        None => Ok(()),
    }
}

struct TopSeed<'c> {
    ctx: &'c Ctx,
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        walk_map(self.ctx, Level::Root, map)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.ctx.fail(top_level_error("a list")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(self.ctx.fail(top_level_error("a string")))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(self.ctx.fail(top_level_error("a boolean")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(self.ctx.fail(top_level_error("a number")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(self.ctx.fail(top_level_error("a number")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(self.ctx.fail(top_level_error("a number")))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.ctx.fail(top_level_error("a tagged value")))
    }
}

fn top_level_error(found: &str) -> String {
    format!(
        "error loading config file: the top level must be a mapping with 'domain' and 'descriptors', found {found}"
    )
}

/// Visitor methods for every value that is neither a map nor (for keys) a string: each
/// hands `self.reject` the value as Go's `%v` would print it. Raising inside the visitor is
/// what makes serde_yaml stamp the value's own position; a run that passes over the
/// problem goes on from here ([`Ctx::problem`]).
macro_rules! reject_scalars_and_lists {
    ($de:lifetime, $out:ty) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<$out, E> {
            self.reject(GoValue::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<$out, E> {
            self.reject(GoValue::Int(v.into()))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<$out, E> {
            self.reject(GoValue::Int(v.into()))
        }
        fn visit_i128<E: de::Error>(self, v: i128) -> Result<$out, E> {
            self.reject(GoValue::Int(v))
        }
        fn visit_u128<E: de::Error>(self, v: u128) -> Result<$out, E> {
            self.reject(GoValue::Float(v as f64))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<$out, E> {
            self.reject(GoValue::Float(v))
        }
        fn visit_unit<E: de::Error>(self) -> Result<$out, E> {
            self.reject(GoValue::Null)
        }
        fn visit_none<E: de::Error>(self) -> Result<$out, E> {
            self.reject(GoValue::Null)
        }
        fn visit_seq<A: SeqAccess<$de>>(self, seq: A) -> Result<$out, A::Error> {
            let v = GoValue::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
            self.reject(v)
        }
        fn visit_enum<A: de::EnumAccess<$de>>(self, _: A) -> Result<$out, A::Error> {
            Err(self.ctx.fail(TAGS))
        }
    };
}

const TAGS: &str = "error loading config file: YAML tags are not supported";

fn walk_map<'de, A: MapAccess<'de>>(ctx: &Ctx, level: Level, mut map: A) -> Result<(), A::Error> {
    let mut seen = HashSet::new();
    while let Some(key) = map.next_key_seed(KeySeed {
        ctx,
        level,
        seen: &mut seen,
    })? {
        let seg = static_key(&key).map(Seg::Key);
        if let Some(seg) = seg
            && !ctx.enter(seg)
        {
            return Err(ctx.fail(ALIAS_BUDGET));
        }
        match level.child(&key) {
            Expect::Skip => {
                map.next_value::<IgnoredAny>()?;
            }
            expect => map.next_value_seed(Walk { ctx, expect })?,
        }
        if seg.is_some() {
            ctx.leave();
        }
    }
    Ok(())
}

/// A map key: must be a string, known, allowed at this level, and not repeated.
struct KeySeed<'c, 's> {
    ctx: &'c Ctx,
    level: Level,
    seen: &'s mut HashSet<String>,
}

impl KeySeed<'_, '_> {
    /// A key that is not a string; passed over, it stands for no known key (its value is
    /// walked as any value).
    fn reject<E: de::Error>(&self, v: GoValue) -> Result<String, E> {
        self.ctx
            .problem(format!("config error, key is not of type string: {v}"))
            .map(|()| String::new())
    }
}

// Checks happen inside the visitor so that serde_yaml stamps the key's own position.
impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<String, E> {
        let ctx = self.ctx;
        if !known(key) {
            ctx.problem(format!("config error, unknown key '{key}'"))?;
        } else if self.level != Level::Any && !self.level.keys().contains(&key) {
            ctx.problem(format!(
                "config error, key '{key}' is not allowed {} (it belongs {})",
                self.level.place(),
                home(key)
            ))?;
        }
        if !self.seen.insert(key.to_owned()) {
            ctx.problem(format!("config error, duplicate key '{key}'"))?;
        }
        Ok(key.to_owned())
    }
    reject_scalars_and_lists!('de, String);
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<String, A::Error> {
        let v = GoValue::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.reject(v)
    }
}

/// A map value.
struct Walk<'c> {
    ctx: &'c Ctx,
    expect: Expect,
}

const CHECK_ERROR: &str = "error checking config";

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let level = match self.expect {
            Expect::Map(level) => level,
            _ => Level::Any,
        };
        walk_map(self.ctx, level, map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let level = match self.expect {
            Expect::List(level) => level,
            _ => Level::Any,
        };
        for i in 0.. {
            if !self.ctx.enter(Seg::Index(i)) {
                return Err(self.ctx.fail(ALIAS_BUDGET));
            }
            let more = seq
                .next_element_seed(Element {
                    ctx: self.ctx,
                    level,
                })?
                .is_some();
            self.ctx.leave();
            if !more {
                break;
            }
        }
        Ok(())
    }
    // Their leaf types: string, int (Go's int is 64-bit), bool and null.
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        if i64::try_from(v).is_ok() {
            Ok(())
        } else {
            self.ctx.problem(CHECK_ERROR)
        }
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.ctx.problem(CHECK_ERROR)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.ctx.problem(CHECK_ERROR)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.ctx.problem(CHECK_ERROR)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self
            .ctx
            .fail("error loading config file: YAML tags are not supported"))
    }
}

/// A list element: must be a map.
struct Element<'c> {
    ctx: &'c Ctx,
    level: Level,
}

impl Element<'_> {
    fn reject<E: de::Error>(&self, v: GoValue) -> Result<(), E> {
        self.ctx.problem(format!(
            "config error, yaml file contains list of type other than map: {v}"
        ))
    }
}

impl<'de> Visitor<'de> for Element<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        walk_map(self.ctx, self.level, map)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.reject(GoValue::Str(v.to_owned()))
    }
    reject_scalars_and_lists!('de, ());
}
