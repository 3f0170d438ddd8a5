//! Pass 2: the typed decode (their `yaml.Unmarshal` into `YamlRoot`), with Go's leniency:
//! null is the zero value, string fields keep the literal text of ints and bools
//! (`value: 007` is `"007"`), bools accept YAML 1.1 words (`yes`, `off`, …).
//!
//! Pass 1 has already guaranteed string, known, unique, well-placed keys and map list
//! elements, so what can still fail here is a value of the wrong shape or type.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::keys::static_key;
use super::metadata::{Metadata, MetadataError};
use super::scalars::{FLAG, Flag, Int, Optional, STRING, Str};
use super::yaml::{ALIAS_BUDGET, Ctx, Seg, first_document, load};
use crate::limit::MAX_BUDGET;

super::yaml::seed_from_any!({T: Fields} Node<'_, T>, {T: Fields} ListOf<'_, T>, Headers);

#[derive(Debug, Default)]
pub struct RawRoot {
    pub domain: String,
    pub descriptors: Vec<RawDescriptor>,
}

#[derive(Debug, Default)]
pub struct RawDescriptor {
    pub key: String,
    pub value: String,
    pub rate_limit: Option<RawLimit>,
    pub rate_limits: Option<Vec<RawLimit>>,
    pub descriptors: Vec<RawDescriptor>,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    pub detailed_metric: bool,
    pub value_to_metric: bool,
    pub share_threshold: bool,
    /// `consistency` as written (`strict` or `batched`), checked by validation.
    pub consistency: Option<String>,
    /// `Err` holds the conversion problem, reported later in their pipeline order.
    pub metadata: Option<Result<Map<String, Value>, MetadataError>>,
    /// `response` (sluice extension), checked by validation (`response.rs`).
    pub response: Option<RawResponse>,
}

/// A descriptor's `response`: what its denial sends, and how it shows in the rate limit
/// headers.
#[derive(Debug, Default)]
pub struct RawResponse {
    pub raw_body: Option<String>,
    pub content_type: Option<String>,
    /// In file order.
    pub headers: Vec<(String, String)>,
    pub hidden: bool,
    pub hide_current_limit: bool,
}

#[derive(Debug, Default)]
pub struct RawLimit {
    /// At most [`MAX_BUDGET`] (the typed decode refuses more).
    pub requests_per_unit: u64,
    pub unit: String,
    pub unlimited: bool,
    pub name: String,
    pub replaces: Vec<String>,
    pub algorithm: Option<String>,
    /// At most [`MAX_BUDGET`].
    pub burst: Option<u64>,
    pub buckets: Option<u32>,
    pub overdraft: Option<bool>,
    pub penalty_seconds: Option<u32>,
    pub unit_multiplier: Option<u32>,
    /// `calendar` (sluice extension), checked by validation: `Some` for `calendar: {}` too
    /// (UTC), `None` when absent or null.
    pub calendar: Option<RawCalendar>,
}

/// A limit's `calendar`: the IANA time zone its periods follow (empty: UTC).
#[derive(Debug, Default)]
pub struct RawCalendar {
    pub time_zone: String,
}

pub(super) fn decode(content: &str, ctx: &Ctx) -> Result<RawRoot, serde_yaml::Error> {
    match first_document(content) {
        Some(doc) => Node::<RawRoot> {
            ctx,
            _t: Default::default(),
        }
        .deserialize(doc)
        .map(Option::unwrap_or_default),
        None => Ok(RawRoot::default()),
    }
}

/// Deserialize the next map value; when it fails without a precise message of its own,
/// explain what `field` should have been.
fn field<'de, A, S>(
    map: &mut A,
    ctx: &Ctx,
    seed: S,
    field: &str,
    should: &str,
) -> Result<S::Value, A::Error>
where
    A: MapAccess<'de>,
    S: DeserializeSeed<'de>,
{
    map.next_value_seed(seed)
        .inspect_err(|_| ctx.note(load(format_args!("'{field}' must be {should}"))))
}

/// The value of boolean field `key` (null: false).
fn flag<'de, A: MapAccess<'de>>(map: &mut A, ctx: &Ctx, key: &str) -> Result<bool, A::Error> {
    field(map, ctx, Flag { ctx, key }, key, FLAG).map(Option::unwrap_or_default)
}

/// A map-shaped node of the schema (root, descriptor, rate limit, replaces entry); null
/// gives `None`.
struct Node<'c, T> {
    ctx: &'c Ctx,
    _t: std::marker::PhantomData<T>,
}

impl<T> Clone for Node<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Node<'_, T> {}

fn node<T>(ctx: &Ctx) -> Node<'_, T> {
    Node {
        ctx,
        _t: std::marker::PhantomData,
    }
}

/// How one schema node reads its fields.
trait Fields: Default {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error>;
}

impl<'de, T: Fields> Visitor<'de> for Node<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut out = T::default();
        while let Some(key) = map.next_key::<String>()? {
            // Pass 1 let only known keys through.
            let seg = static_key(&key).map(Seg::Key);
            if let Some(seg) = seg
                && !self.ctx.enter(seg)
            {
                return Err(self.ctx.fail(load(ALIAS_BUDGET)));
            }
            out.read(&key, &mut map, self.ctx)?;
            if seg.is_some() {
                self.ctx.leave();
            }
        }
        Ok(Some(out))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// A list of schema nodes; null is empty.
struct ListOf<'c, T>(Node<'c, T>);

impl<'de, T: Fields> Visitor<'de> for ListOf<'_, T> {
    type Value = Vec<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::new();
        loop {
            if !self.0.ctx.enter(Seg::Index(out.len())) {
                return Err(self.0.ctx.fail(load(ALIAS_BUDGET)));
            }
            let item = seq.next_element_seed(self.0)?;
            self.0.ctx.leave();
            match item {
                Some(item) => out.push(item.unwrap_or_default()),
                None => return Ok(out),
            }
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }
}

impl Fields for RawRoot {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key {
            "domain" => self.domain = field(map, ctx, Str, key, STRING)?,
            "descriptors" => {
                self.descriptors = field(map, ctx, ListOf(node(ctx)), key, "a list of descriptors")?
            }
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl Fields for RawDescriptor {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key {
            "key" => self.key = field(map, ctx, Str, key, STRING)?,
            "value" => self.value = field(map, ctx, Str, key, STRING)?,
            "rate_limit" => self.rate_limit = field(map, ctx, node(ctx), key, "a mapping")?,
            "rate_limits" => {
                let seed = Optional(ListOf(node(ctx)));
                self.rate_limits = field(map, ctx, seed, key, "a list of rate limits")?
            }
            "descriptors" => {
                self.descriptors = field(map, ctx, ListOf(node(ctx)), key, "a list of descriptors")?
            }
            "shadow_mode" => self.shadow_mode = flag(map, ctx, key)?,
            "quota_mode" => self.quota_mode = flag(map, ctx, key)?,
            "detailed_metric" => self.detailed_metric = flag(map, ctx, key)?,
            "value_to_metric" => self.value_to_metric = flag(map, ctx, key)?,
            "share_threshold" => self.share_threshold = flag(map, ctx, key)?,
            "consistency" => self.consistency = Some(field(map, ctx, Str, key, STRING)?),
            "metadata" => self.metadata = field(map, ctx, Metadata, key, "a mapping")?,
            "response" => self.response = field(map, ctx, node(ctx), key, "a mapping")?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl Fields for RawResponse {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key {
            "raw_body" => self.raw_body = Some(field(map, ctx, Str, key, STRING)?),
            "content_type" => self.content_type = Some(field(map, ctx, Str, key, STRING)?),
            "headers" => {
                self.headers = field(
                    map,
                    ctx,
                    Headers,
                    key,
                    "a mapping of header names to strings",
                )?
            }
            "hidden" => self.hidden = flag(map, ctx, key)?,
            "hide_current_limit" => self.hide_current_limit = flag(map, ctx, key)?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// `headers`: name → value, both read as their string fields are; null is none.
struct Headers;

impl<'de> Visitor<'de> for Headers {
    type Value = Vec<(String, String)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping of header names to strings")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(name) = map.next_key_seed(Str)? {
            out.push((name, map.next_value_seed(Str)?));
        }
        Ok(out)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
}

impl Fields for RawLimit {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        // A u32 field, and a count of up to 2^53.
        let int = |map: &mut A| {
            let max = u64::from(u32::MAX);
            let n = field(map, ctx, Int { ctx, key, max }, key, Int::should(max))?;
            Ok(n.and_then(|n| u32::try_from(n).ok()))
        };
        let count = |map: &mut A| {
            let max = MAX_BUDGET;
            field(map, ctx, Int { ctx, key, max }, key, Int::should(max))
        };
        match key {
            "requests_per_unit" => self.requests_per_unit = count(map)?.unwrap_or_default(),
            "unit" => self.unit = field(map, ctx, Str, key, STRING)?,
            "unlimited" => {
                self.unlimited = field(map, ctx, Flag { ctx, key }, key, FLAG)?.unwrap_or_default()
            }
            "name" => self.name = field(map, ctx, Str, key, STRING)?,
            "replaces" => {
                let entries: Vec<Replace> = field(
                    map,
                    ctx,
                    ListOf(node(ctx)),
                    key,
                    "a list of {name: ...} entries",
                )?;
                self.replaces = entries.into_iter().map(|r| r.0).collect();
            }
            "algorithm" => {
                self.algorithm = Some(field(map, ctx, Str, key, STRING)?).filter(|a| !a.is_empty())
            }
            "burst" => self.burst = count(map)?,
            "buckets" => self.buckets = int(map)?,
            "overdraft" => self.overdraft = field(map, ctx, Flag { ctx, key }, key, FLAG)?,
            "penalty_seconds" => self.penalty_seconds = int(map)?,
            "unit_multiplier" => self.unit_multiplier = int(map)?,
            "calendar" => self.calendar = field(map, ctx, node(ctx), key, "a mapping")?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl Fields for RawCalendar {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        one_string(&mut self.time_zone, "time_zone", key, map, ctx)
    }
}

/// A map whose one field is the string `name` (a `calendar`, a `replaces` entry): its value
/// into `value` when `key` is it.
fn one_string<'de, A: MapAccess<'de>>(
    value: &mut String,
    name: &str,
    key: &str,
    map: &mut A,
    ctx: &Ctx,
) -> Result<(), A::Error> {
    if key == name {
        *value = field(map, ctx, Str, key, STRING)?;
        Ok(())
    } else {
        skip(map)
    }
}

/// One `replaces` entry: its `name`.
#[derive(Default)]
struct Replace(String);

impl Fields for Replace {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        one_string(&mut self.0, "name", key, map, ctx)
    }
}

fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(drop)
}
