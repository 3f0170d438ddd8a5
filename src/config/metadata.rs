//! `metadata`: any YAML mapping, converted to a JSON object (their
//! `google.protobuf.Struct`). Conversion problems do not abort the decode: they travel as
//! a [`MetadataError`] and are reported later, in their pipeline's order (`error parsing
//! metadata`).

use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

super::yaml::seed_from_any!(Metadata, Json);

/// `metadata`: a mapping converted to a JSON object (their `google.protobuf.Struct`).
pub(super) struct Metadata;

/// Why a metadata value has no JSON form.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("invalid number {0}")]
    Number(String),
    #[error("key is not of type string: {0}")]
    Key(Value),
}

type Converted = Result<Value, MetadataError>;

impl<'de> Visitor<'de> for Metadata {
    type Value = Option<Result<Map<String, Value>, MetadataError>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(Some(Json.visit_map(map)?.map(|v| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        })))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Any metadata value as JSON. Never fails on content: problems come back as `Err`.
#[derive(Clone, Copy)]
struct Json;

impl<'de> Visitor<'de> for Json {
    type Value = Converted;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Converted, E> {
        Ok(Ok(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Converted, E> {
        Ok(Ok(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Converted, E> {
        Ok(Ok(Value::from(v)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Converted, E> {
        self.visit_f64(v as f64)
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Converted, E> {
        self.visit_f64(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Converted, E> {
        // Struct numbers are doubles, but NaN and infinities have no JSON form.
        Ok(serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| MetadataError::Number(super::yaml::go_float(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Converted, E> {
        Ok(Ok(Value::String(v.to_owned())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Converted, E> {
        Ok(Ok(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Converted, E> {
        Ok(Ok(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Converted, A::Error> {
        let (mut list, mut problem) = (Vec::new(), None);
        while let Some(item) = seq.next_element_seed(Json)? {
            match item {
                Ok(v) => list.push(v),
                Err(e) => {
                    problem.get_or_insert(e);
                }
            }
        }
        Ok(match problem {
            Some(e) => Err(e),
            None => Ok(Value::Array(list)),
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Converted, A::Error> {
        let mut out = Ok(Map::new());
        while let Some(key) = map.next_key_seed(Json)? {
            let value = map.next_value_seed(Json)?;
            let Ok(obj) = &mut out else { continue };
            match (key, value) {
                (Ok(Value::String(k)), Ok(v)) => {
                    obj.insert(k, v);
                }
                (Ok(k), Ok(_)) => out = Err(MetadataError::Key(k)),
                (Err(e), _) | (_, Err(e)) => out = Err(e),
            }
        }
        Ok(out.map(Value::Object))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Converted, A::Error> {
        let (_tag, variant): (IgnoredAny, _) = data.variant()?;
        de::VariantAccess::newtype_variant_seed(variant, Json)
    }
}
