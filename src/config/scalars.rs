//! Scalar fields of the typed decode, read the way Go's yaml.v2 fills Go fields: null is
//! the zero value, a `string` takes the literal text of any scalar, a `bool` takes YAML
//! 1.1's words, a `uint32` takes only integers in range (and so do the counts sluice takes
//! up to 2^53: `requests_per_unit`, `burst`).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

use super::yaml::{Ctx, load};

super::yaml::seed_from_any!(Int<'_, '_>);

pub(super) const STRING: &str = "a string";
pub(super) const FLAG: &str = "true or false";
pub(super) const INT: &str = "an integer between 0 and 4294967295";
/// What `requests_per_unit` and `burst` take: up to 2^53 ([`crate::limit::MAX_BUDGET`]).
pub(super) const COUNT: &str = "an integer between 0 and 9007199254740992";

/// `None` for null, else the inner seed's value.
pub(super) struct Optional<S>(pub S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Optional<S> {
    type Value = Option<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Optional<S> {
    type Value = Option<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(d).map(Some)
    }
}

/// A string field: the literal text of any scalar (like yaml.v2 into a Go `string`); null
/// is empty. `deserialize_str` is what keeps `007` as `"007"` rather than `7`.
#[derive(Clone, Copy)]
pub(super) struct Str;

impl<'de> DeserializeSeed<'de> for Str {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        Optional(StrText)
            .deserialize(d)
            .map(Option::unwrap_or_default)
    }
}

#[derive(Clone, Copy)]
struct StrText;

impl<'de> DeserializeSeed<'de> for StrText {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for StrText {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
}

/// A bool field, with YAML 1.1's words as Go's yaml.v2 reads them; null is `None`.
pub(super) struct Flag<'c, 'k> {
    pub ctx: &'c Ctx,
    pub key: &'k str,
}

impl<'de> DeserializeSeed<'de> for Flag<'_, '_> {
    type Value = Option<bool>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<bool>, D::Error> {
        Optional(FlagText(self)).deserialize(d)
    }
}

struct FlagText<'c, 'k>(Flag<'c, 'k>);

impl<'de> DeserializeSeed<'de> for FlagText<'_, '_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for FlagText<'_, '_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(FLAG)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match v {
            "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "y" | "Y" | "on" | "On" | "ON" => {
                Ok(true)
            }
            "false" | "False" | "FALSE" | "no" | "No" | "NO" | "n" | "N" | "off" | "Off"
            | "OFF" => Ok(false),
            other => Err(self.0.ctx.fail(load(format_args!(
                "'{}' must be {FLAG}, found '{other}'",
                self.0.key
            )))),
        }
    }
}

/// An integer field of `0..=max`: a `u32` (`penalty_seconds`, `unit_multiplier`, …, `max`
/// `u32::MAX`, message [`INT`]) or a count (`requests_per_unit`, `burst`: `max` 2^53,
/// message [`COUNT`]); null is `None`.
pub(super) struct Int<'c, 'k> {
    pub ctx: &'c Ctx,
    pub key: &'k str,
    pub max: u64,
}

impl Int<'_, '_> {
    /// What the field must be, as the error says it.
    pub fn should(max: u64) -> &'static str {
        if max == u64::from(u32::MAX) {
            INT
        } else {
            COUNT
        }
    }

    fn bad<E: de::Error>(&self, found: impl fmt::Display) -> E {
        self.ctx.fail(load(format_args!(
            "'{}' must be {}, found '{found}'",
            self.key,
            Self::should(self.max)
        )))
    }

    fn within<E: de::Error>(
        &self,
        v: impl TryInto<u64> + fmt::Display + Copy,
    ) -> Result<Option<u64>, E> {
        match v.try_into() {
            Ok(n) if n <= self.max => Ok(Some(n)),
            _ => Err(self.bad(v)),
        }
    }
}

impl<'de> Visitor<'de> for Int<'_, '_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(Self::should(self.max))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<u64>, E> {
        self.within(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<u64>, E> {
        self.within(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<u64>, E> {
        Err(self.bad(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<u64>, E> {
        Err(self.bad(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }
}
