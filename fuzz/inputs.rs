//! Structure-aware generators: inputs that get past the first parse, so the fuzzer reaches
//! validation, matching and the decision path (random bytes almost never do). Values come
//! from pools of names the code knows (units, algorithms, fields, rule keys of the configs
//! the request targets load) mixed with boundary values and junk.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryResponse, Resource};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::{Any, Struct, UInt64Value, Value, value::Kind};
use prost::Message;
use sluice::xds::proto;

use crate::Rng;

const DOMAINS: &[&str] = &["api", "fuzz", "edge", "rl", "", "api\u{0}", "ünï"];
const KEYS: &[&str] = &[
    "fixed",
    "tenant",
    "login",
    "upload",
    "webhook",
    "search",
    "api_key",
    "k",
    "path",
    "remote_address",
    "generic_key",
    "header_match",
    "nested",
    "a",
    "",
    "database",
];
const VALUES: &[&str] = &[
    "v", "1", "x", "/api/v1", "/api/*", "*", "", "users", "foo", "10.0.0.1", "ü", "\u{0}", "a*b*c",
    "**",
];
const UNITS: &[&str] = &[
    "second", "minute", "hour", "day", "week", "month", "year", "SECOND", "Minute", "forever", "",
    "0", "unknown",
];
const ALGORITHMS: &[&str] = &[
    "fixed_window",
    "sliding_window",
    "sliding_log",
    "token_bucket",
    "leaky_bucket",
    "gcra",
    "GCRA",
    "none",
    "",
];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "5",
    "60",
    "1000",
    "4294967295",
    "4294967296",
    "-1",
    "1.5",
    "1e309",
    "ten",
    "9007199254740993",
    "0x10",
    "~",
    "null",
    "true",
    "[]",
    "{}",
];

fn word(rng: &mut Rng, pool: &[&str]) -> String {
    if rng.chance(20) {
        // Long or odd: bounds and escapes.
        let n = rng.pick(&[1, 2, 300, 9000][..]);
        let c = *rng.pick(&['a', '*', '"', '\\', ':', 'é']);
        return std::iter::repeat_n(c, *n).collect();
    }
    (*rng.pick(pool)).to_owned()
}

/// Mostly one of the first `valid` entries of `pool` (so most rules validate and the
/// compiler behind the validator runs), sometimes anything in it.
fn mostly(rng: &mut Rng, pool: &[&str], valid: usize) -> String {
    if rng.chance(5) {
        word(rng, pool)
    } else {
        pool[rng.below(valid)].to_owned()
    }
}

fn yaml_scalar(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A field name and how to make its value.
type Field = (&'static str, fn(&mut Rng) -> String);

fn limit_yaml(rng: &mut Rng, indent: &str, out: &mut String) {
    let fields: [Field; 11] = [
        ("unit", |r| yaml_scalar(&word(r, UNITS))),
        ("requests_per_unit", |r| (*r.pick(NUMBERS)).to_owned()),
        ("algorithm", |r| yaml_scalar(&word(r, ALGORITHMS))),
        ("burst", |r| (*r.pick(NUMBERS)).to_owned()),
        ("buckets", |r| (*r.pick(NUMBERS)).to_owned()),
        ("penalty_seconds", |r| (*r.pick(NUMBERS)).to_owned()),
        ("unit_multiplier", |r| (*r.pick(NUMBERS)).to_owned()),
        ("overdraft", |r| {
            (*r.pick(&["true", "false", "1", "yes"])).to_owned()
        }),
        ("unlimited", |r| (*r.pick(&["true", "false"])).to_owned()),
        ("name", |r| yaml_scalar(&word(r, KEYS))),
        ("replaces", |r| {
            format!("[{{name: {}}}]", yaml_scalar(&word(r, KEYS)))
        }),
    ];
    // Usually the two required fields, then any others.
    if !rng.chance(8) {
        out.push_str(&format!(
            "{indent}unit: {}\n",
            yaml_scalar(&mostly(rng, UNITS, 7))
        ));
        out.push_str(&format!(
            "{indent}requests_per_unit: {}\n",
            mostly(rng, NUMBERS, 6)
        ));
        if rng.chance(2) {
            out.push_str(&format!(
                "{indent}algorithm: {}\n",
                mostly(rng, ALGORITHMS, 6)
            ));
        }
    }
    for _ in 0..rng.below(3) {
        let (k, f) = rng.pick(&fields);
        // A repeated key is a YAML error before anything else: rarely.
        if out.contains(&format!("{indent}{k}:")) && !rng.chance(10) {
            continue;
        }
        out.push_str(&format!("{indent}{k}: {}\n", f(rng)));
    }
}

fn descriptors_yaml(rng: &mut Rng, depth: usize, indent: &str, out: &mut String) {
    for _ in 0..1 + rng.below(4) {
        out.push_str(&format!(
            "{indent}- key: {}\n",
            yaml_scalar(&word(rng, KEYS))
        ));
        let inner = format!("{indent}  ");
        if rng.chance(2) {
            out.push_str(&format!(
                "{inner}value: {}\n",
                yaml_scalar(&word(rng, VALUES))
            ));
        }
        match rng.below(4) {
            0 => {}
            1 => {
                out.push_str(&format!("{inner}rate_limits:\n"));
                for _ in 0..1 + rng.below(3) {
                    out.push_str(&format!("{inner}  -\n"));
                    limit_yaml(rng, &format!("{inner}    "), out);
                }
            }
            _ => {
                out.push_str(&format!("{inner}rate_limit:\n"));
                limit_yaml(rng, &format!("{inner}  "), out);
            }
        }
        for flag in [
            "shadow_mode",
            "quota_mode",
            "detailed_metric",
            "value_to_metric",
            "share_threshold",
        ] {
            if rng.chance(8) {
                out.push_str(&format!(
                    "{inner}{flag}: {}\n",
                    rng.pick(&["true", "false", "3"])
                ));
            }
        }
        if rng.chance(8) {
            out.push_str(&format!(
                "{inner}metadata: {{team: {}, n: {}}}\n",
                yaml_scalar(&word(rng, VALUES)),
                rng.pick(NUMBERS)
            ));
        }
        if depth < 6 && rng.chance(3) {
            out.push_str(&format!("{inner}descriptors:\n"));
            descriptors_yaml(rng, depth + 1, &format!("{inner}  "), out);
        }
    }
}

/// A rule file: mostly valid shape, random content; sometimes aliases, several documents,
/// or deep nesting.
pub fn rules_yaml(rng: &mut Rng) -> String {
    let mut out = String::new();
    for doc in 0..1 + usize::from(rng.chance(5)) {
        if doc > 0 {
            out.push_str("---\n");
        }
        out.push_str(&format!("domain: {}\n", yaml_scalar(&word(rng, DOMAINS))));
        out.push_str("descriptors:\n");
        descriptors_yaml(rng, 0, "  ", &mut out);
    }
    match rng.below(10) {
        0 => {
            // Alias expansion (the "billion laughs" shape).
            out.push_str("x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol]\n");
            for i in 1..1 + rng.below(9) {
                let p = i - 1;
                out.push_str(&format!(
                    "x{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
                ));
            }
        }
        1 => {
            let n = rng.below(400);
            out.push_str(&"[".repeat(n));
            out.push_str(&"]".repeat(rng.below(n + 1)));
        }
        _ => {}
    }
    out
}

fn entry(rng: &mut Rng) -> Entry {
    Entry {
        key: word(rng, KEYS),
        value: word(rng, VALUES),
    }
}

fn descriptor(rng: &mut Rng) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: (0..rng.below(4)).map(|_| entry(rng)).collect(),
        limit: rng.chance(6).then(|| RateLimitOverride {
            requests_per_unit: [0, 1, 10, u32::MAX][rng.below(4)],
            unit: rng.below(9) as i32 - 1,
        }),
        hits_addend: rng.chance(4).then(|| UInt64Value {
            value: [0, 1, 3, 1_000_000_000, 1_000_000_001, u64::MAX][rng.below(6)],
        }),
        is_negative_hits: rng.chance(8),
    }
}

/// A `RateLimitRequest` aimed at the loaded rules.
pub fn request(rng: &mut Rng) -> RateLimitRequest {
    RateLimitRequest {
        domain: word(rng, DOMAINS),
        descriptors: (0..rng.below(6)).map(|_| descriptor(rng)).collect(),
        hits_addend: [0, 0, 1, 2, 1_000_000_000, u32::MAX][rng.below(6)],
    }
}

/// The same as `/json` text, with the odd field name, type or number.
pub fn request_json(rng: &mut Rng) -> String {
    let r = request(rng);
    let descriptors: Vec<serde_json::Value> = r
        .descriptors
        .iter()
        .map(|d| {
            let mut o = serde_json::Map::new();
            o.insert(
                "entries".into(),
                d.entries
                    .iter()
                    .map(|e| serde_json::json!({"key": e.key, "value": e.value}))
                    .collect(),
            );
            if let Some(l) = &d.limit {
                let unit = if rng.chance(2) {
                    serde_json::json!(rng.pick(&[
                        "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR", "UNKNOWN",
                        "second"
                    ]))
                } else {
                    serde_json::json!(l.unit)
                };
                o.insert(
                    "limit".into(),
                    serde_json::json!({"requestsPerUnit": l.requests_per_unit, "unit": unit}),
                );
            }
            if let Some(h) = &d.hits_addend {
                o.insert(
                    (*rng.pick(&["hitsAddend", "hits_addend"])).into(),
                    serde_json::json!(h.value),
                );
            }
            o.into()
        })
        .collect();
    let mut o = serde_json::Map::new();
    o.insert("domain".into(), r.domain.into());
    o.insert("descriptors".into(), descriptors.into());
    if r.hits_addend > 0 {
        o.insert("hitsAddend".into(), r.hits_addend.into());
    }
    if rng.chance(10) {
        o.insert(
            (*rng.pick(&["extra", "hits_addend"])).into(),
            serde_json::json!(rng.pick(&[-1.5, 1e300, 0.0])),
        );
    }
    serde_json::Value::Object(o).to_string()
}

fn metadata(rng: &mut Rng, depth: usize) -> Struct {
    let mut s = Struct::default();
    for _ in 0..rng.below(3) {
        let kind = match rng.below(5) {
            0 => Kind::NumberValue(*rng.pick(&[0.0, -1.0, 1e308, f64::NAN, f64::INFINITY])),
            1 => Kind::StringValue(word(rng, VALUES)),
            2 => Kind::BoolValue(rng.chance(2)),
            3 if depth < 4 => Kind::StructValue(metadata(rng, depth + 1)),
            _ => Kind::NullValue(0),
        };
        s.fields.insert(word(rng, KEYS), Value { kind: Some(kind) });
    }
    s
}

fn xds_descriptor(rng: &mut Rng, depth: usize) -> proto::RateLimitDescriptor {
    proto::RateLimitDescriptor {
        key: word(rng, KEYS),
        value: if rng.chance(2) {
            word(rng, VALUES)
        } else {
            String::new()
        },
        rate_limit: rng.chance(2).then(|| proto::RateLimitPolicy {
            unit: rng.below(10) as i32 - 1,
            requests_per_unit: [0, 1, 60, u32::MAX][rng.below(4)],
            unlimited: rng.chance(6),
            name: if rng.chance(3) {
                word(rng, KEYS)
            } else {
                String::new()
            },
            replaces: (0..rng.below(2))
                .map(|_| proto::RateLimitReplace {
                    name: word(rng, KEYS),
                })
                .collect(),
        }),
        descriptors: if depth < 5 && rng.chance(3) {
            (0..1 + rng.below(3))
                .map(|_| xds_descriptor(rng, depth + 1))
                .collect()
        } else {
            Vec::new()
        },
        shadow_mode: rng.chance(6),
        detailed_metric: rng.chance(6),
        quota_mode: rng.chance(6),
        metadata: rng.chance(6).then(|| metadata(rng, 0)),
    }
}

/// A response of `RateLimitConfig` resources: bare, wrapped in `Resource`, or of the
/// wrong type.
pub fn discovery_response(rng: &mut Rng) -> DiscoveryResponse {
    let resources = (0..rng.below(4))
        .map(|_| {
            let config = proto::RateLimitConfig {
                name: word(rng, KEYS),
                domain: word(rng, DOMAINS),
                descriptors: (0..rng.below(4)).map(|_| xds_descriptor(rng, 0)).collect(),
            };
            let any = Any {
                type_url: proto::TYPE_URL.to_owned(),
                value: config.encode_to_vec(),
            };
            match rng.below(6) {
                0 => Any {
                    type_url: "type.googleapis.com/envoy.service.discovery.v3.Resource".into(),
                    value: Resource {
                        name: word(rng, KEYS),
                        resource: (!rng.chance(4)).then_some(any),
                        ..Resource::default()
                    }
                    .encode_to_vec(),
                },
                1 => Any {
                    type_url: "type.googleapis.com/something.Else".into(),
                    ..any
                },
                _ => any,
            }
        })
        .collect();
    DiscoveryResponse {
        version_info: "1".into(),
        resources,
        type_url: proto::TYPE_URL.into(),
        nonce: "n".into(),
        ..DiscoveryResponse::default()
    }
}
