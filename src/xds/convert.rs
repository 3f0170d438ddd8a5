//! xDS resources → the rule trees a rule file's parser builds (`config::RawRoot`), so the
//! one validator in `config` checks them with the same messages (their `ConfigXdsProtoToYaml`
//! does the same).
//!
//! What a rule file has and the resource cannot carry stays at its default:
//! `value_to_metric`, `share_threshold` and every sluice extension (`algorithm`, `burst`,
//! `buckets`, `overdraft`, `penalty_seconds`, `rate_limits`): an xDS rule is always an
//! envoyproxy/ratelimit fixed-window rule.

use envoy_types::pb::google::protobuf::{Any, Struct, Value as PbValue, value::Kind};
use prost::Message;
use serde_json::{Map, Number, Value};

use super::proto::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit, TYPE_URL,
};
use crate::config::{MetadataError, RawDescriptor, RawLimit, RawRoot};

/// `envoy.service.discovery.v3.Resource`: go-control-plane wraps resources in it when they
/// carry a TTL.
const RESOURCE_WRAPPER: &str = "type.googleapis.com/envoy.service.discovery.v3.Resource";

/// Why a resource is not a rule tree.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("resource {0}: {1}")]
    At(usize, Box<ResourceError>),
    #[error("cannot decode{}: {source}", .wrapper.map(|w| format!(" {w}")).unwrap_or_default())]
    Decode {
        wrapper: Option<&'static str>,
        #[source]
        source: prost::DecodeError,
    },
    #[error("{RESOURCE_WRAPPER} '{0}' carries no resource")]
    Empty(String),
    #[error("type {0} is not {TYPE_URL}")]
    Type(String),
}

/// Decode every resource of a response: (name for errors, rule tree).
pub fn documents(resources: &[Any]) -> Result<Vec<(String, RawRoot)>, ResourceError> {
    resources
        .iter()
        .enumerate()
        .map(|(i, any)| {
            let config = decode(any).map_err(|e| ResourceError::At(i, Box::new(e)))?;
            Ok((config.name.clone(), root(config)))
        })
        .collect()
}

fn decode(any: &Any) -> Result<RateLimitConfig, ResourceError> {
    let decode_error = |wrapper| move |source| ResourceError::Decode { wrapper, source };
    if any.type_url == RESOURCE_WRAPPER {
        let wrapped =
            envoy_types::pb::envoy::service::discovery::v3::Resource::decode(any.value.as_slice())
                .map_err(decode_error(Some(RESOURCE_WRAPPER)))?;
        let inner = wrapped.resource.ok_or(ResourceError::Empty(wrapped.name))?;
        return decode(&inner);
    }
    if any.type_url != TYPE_URL {
        return Err(ResourceError::Type(any.type_url.clone()));
    }
    RateLimitConfig::decode(any.value.as_slice()).map_err(decode_error(None))
}

fn root(c: RateLimitConfig) -> RawRoot {
    RawRoot {
        domain: c.domain,
        descriptors: c.descriptors.into_iter().map(descriptor).collect(),
    }
}

fn descriptor(d: RateLimitDescriptor) -> RawDescriptor {
    RawDescriptor {
        key: d.key,
        value: d.value,
        rate_limit: d.rate_limit.map(limit),
        descriptors: d.descriptors.into_iter().map(descriptor).collect(),
        shadow_mode: d.shadow_mode,
        quota_mode: d.quota_mode,
        detailed_metric: d.detailed_metric,
        metadata: d.metadata.map(|s| object(&s)),
        ..RawDescriptor::default()
    }
}

fn limit(p: RateLimitPolicy) -> RawLimit {
    RawLimit {
        // A uint32 in their proto: xDS budgets stop at 4294967295, and the proto has no
        // field for a calendar (docs/how-to/rules-over-xds.md).
        requests_per_unit: u64::from(p.requests_per_unit),
        // Their conversion: the enum's name (`UNKNOWN` is then no unit), or the number for
        // a value this build does not know, which the validator rejects by name.
        unit: RateLimitUnit::try_from(p.unit)
            .map_or_else(|_| p.unit.to_string(), |u| u.as_str_name().to_string()),
        unlimited: p.unlimited,
        name: p.name,
        replaces: p.replaces.into_iter().map(|r| r.name).collect(),
        ..RawLimit::default()
    }
}

/// A `google.protobuf.Struct` as the JSON object a rule file's `metadata` becomes.
fn object(s: &Struct) -> Result<Map<String, Value>, MetadataError> {
    s.fields
        .iter()
        .map(|(k, v)| Ok((k.clone(), json(v)?)))
        .collect()
}

fn json(v: &PbValue) -> Result<Value, MetadataError> {
    Ok(match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::NumberValue(n)) => {
            Value::Number(Number::from_f64(*n).ok_or_else(|| MetadataError::Number(n.to_string()))?)
        }
        Some(Kind::StructValue(s)) => Value::Object(object(s)?),
        Some(Kind::ListValue(l)) => {
            Value::Array(l.values.iter().map(json).collect::<Result<_, _>>()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, RateLimitConfig as Rules};

    fn any(c: &RateLimitConfig) -> Any {
        Any {
            type_url: TYPE_URL.into(),
            value: c.encode_to_vec(),
        }
    }

    fn policy(unit: RateLimitUnit, rpu: u32) -> Option<RateLimitPolicy> {
        Some(RateLimitPolicy {
            unit: unit as i32,
            requests_per_unit: rpu,
            ..Default::default()
        })
    }

    fn build(configs: &[RateLimitConfig]) -> Result<Rules, Vec<String>> {
        let resources: Vec<Any> = configs.iter().map(any).collect();
        let docs = documents(&resources).map_err(|e| vec![e.to_string()])?;
        Rules::from_documents(docs, &LoadOptions::default())
            .map_err(|es| es.into_iter().map(|e| e.message).collect())
    }

    #[test]
    fn a_resource_compiles_like_the_same_rule_file() {
        let c = RateLimitConfig {
            name: "edge".into(),
            domain: "edge".into(),
            descriptors: vec![RateLimitDescriptor {
                key: "path".into(),
                value: "/api/*".into(),
                rate_limit: policy(RateLimitUnit::Week, 5),
                metadata: Some(Struct {
                    fields: [(
                        "team".to_string(),
                        PbValue {
                            kind: Some(Kind::StringValue("a".into())),
                        },
                    )]
                    .into(),
                }),
                ..Default::default()
            }],
        };
        let rules = build(&[c]).unwrap();
        let m = rules
            .domain("edge")
            .unwrap()
            .find(&[("path", "/api/x")])
            .expect("glob matches");
        assert_eq!(m.rule.limits[0].requests_per_unit, 5);
        assert_eq!(m.rule.limits[0].unit.name(), "WEEK");
        assert_eq!(m.rule.metadata.as_ref().unwrap()["team"], "a");
    }

    #[test]
    fn errors_are_the_file_messages_under_the_resource_name() {
        let bad_unit = RateLimitConfig {
            name: "r1".into(),
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor {
                key: "k".into(),
                rate_limit: policy(RateLimitUnit::Unknown, 1),
                ..Default::default()
            }],
        };
        assert_eq!(
            build(&[bad_unit]).unwrap_err(),
            ["r1: invalid rate limit unit 'UNKNOWN'"]
        );
        let unlimited = RateLimitConfig {
            name: "r2".into(),
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor {
                key: "k".into(),
                rate_limit: Some(RateLimitPolicy {
                    unlimited: true,
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        assert!(
            build(std::slice::from_ref(&unlimited)).is_ok(),
            "UNKNOWN is no unit"
        );
        let dup = RateLimitConfig {
            name: "r3".into(),
            ..unlimited.clone()
        };
        assert_eq!(
            build(&[unlimited, dup]).unwrap_err(),
            ["r3: duplicate domain 'd' in config file"]
        );
        let future_unit = RateLimitConfig {
            name: "r4".into(),
            domain: "e".into(),
            descriptors: vec![RateLimitDescriptor {
                key: "k".into(),
                rate_limit: Some(RateLimitPolicy {
                    unit: 42,
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        assert_eq!(
            build(&[future_unit]).unwrap_err(),
            ["r4: invalid rate limit unit '42'"]
        );
    }

    #[test]
    fn wrapped_and_foreign_resources() {
        let c = RateLimitConfig {
            name: "w".into(),
            domain: "w".into(),
            descriptors: Vec::new(),
        };
        let wrapped = Any {
            type_url: RESOURCE_WRAPPER.into(),
            value: envoy_types::pb::envoy::service::discovery::v3::Resource {
                name: "w".into(),
                resource: Some(any(&c)),
                ..Default::default()
            }
            .encode_to_vec(),
        };
        assert_eq!(documents(&[wrapped]).unwrap()[0].1.domain, "w");
        let foreign = Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value: Vec::new(),
        };
        let e = documents(&[any(&c), foreign]).unwrap_err().to_string();
        assert!(
            e.starts_with("resource 1: type type.googleapis.com/envoy.config.cluster"),
            "{e}"
        );
        let garbage = Any {
            type_url: TYPE_URL.into(),
            value: vec![0xff, 0xff],
        };
        let e = documents(&[garbage]).unwrap_err().to_string();
        assert!(e.contains("cannot decode"));
    }
}
