//! The locator: a document path ([`Seg`]s) back to a line and column, by re-reading the
//! file until the node is reached and raising an error there, the only way serde_yaml
//! reveals a position.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::yaml::{GoValue, Seg, first_document, position};

super::yaml::seed_from_any!(Locate<'_>, KeyHere<'_>);

/// Position of the node at `path` (or of its deepest existing ancestor) in `content`.
pub(super) fn locate(content: &str, path: &[Seg]) -> (Option<usize>, Option<usize>) {
    locate_in(content, path, false)
}

/// Position of the key of the field at `path` (which ends with a key): where an aliased
/// value is used, when locating the value would find its anchor instead.
pub(super) fn locate_key(content: &str, path: &[Seg]) -> (Option<usize>, Option<usize>) {
    locate_in(content, path, true)
}

fn locate_in(content: &str, path: &[Seg], at_key: bool) -> (Option<usize>, Option<usize>) {
    let Some(doc) = first_document(content) else {
        return (None, None);
    };
    match (Locate { path, at_key }).deserialize(doc) {
        Ok(()) => (None, None),
        Err(err) => position(&err),
    }
}

struct Locate<'p> {
    path: &'p [Seg],
    /// At the end of the path, stop at the key rather than its value.
    at_key: bool,
}

/// Reaching the target (or running out of path) raises an error at the current node.
fn here<E: de::Error>() -> E {
    E::custom("here")
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(want), rest)) = self.path.split_first() else {
            return Err(here());
        };
        if rest.is_empty() && self.at_key {
            while map.next_key_seed(KeyHere(want))?.is_some() {
                map.next_value::<IgnoredAny>()?;
            }
            return Err(here());
        }
        while let Some(key) = map.next_key::<KeyText>()? {
            if key.0.as_deref() == Some(*want) {
                map.next_value_seed(Locate {
                    path: rest,
                    at_key: self.at_key,
                })?;
                return Err(here());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Err(here())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.path.split_first() else {
            return Err(here());
        };
        let mut i = 0;
        while i < *want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(here());
            }
            i += 1;
        }
        seq.next_element_seed(Locate {
            path: rest,
            at_key: self.at_key,
        })?;
        Err(here())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(here())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(here())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(here())
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        Err(here())
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        Err(here())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(here())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(here())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(here())
    }
}

/// A map key that raises [`here`] (so serde_yaml stamps the key's own position) when it is
/// the wanted one. Keys on a located path are strings (pass 1 requires it).
struct KeyHere<'w>(&'w str);

impl<'de> Visitor<'de> for KeyHere<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<(), E> {
        if key == self.0 { Err(here()) } else { Ok(()) }
    }
}

/// A map key as text when it is a string (the locator only follows string keys).
struct KeyText(Option<String>);

impl<'de> de::Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        GoValue::deserialize(d).map(|v| match v {
            GoValue::Str(s) => KeyText(Some(s)),
            _ => KeyText(None),
        })
    }
}
