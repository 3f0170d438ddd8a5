//! The request messages of `ShouldRateLimit`, written by hand, wire-compatible with
//! envoy-types' `RateLimitRequest`, `RateLimitDescriptor`, `Entry` and `RateLimitOverride`
//! (same field numbers and wire types), except that descriptor entries are **bytes**.
//!
//! Why: the protos declare `key` and `value` as `string`, so a strict decoder refuses a
//! value that is not UTF-8, and Envoy copies request header bytes into values. A client
//! sending header byte 0xFF would get a decoding error, and with Envoy's
//! `failure_mode_deny: false` an error lets the request through unlimited. Decoded as bytes,
//! every value is one like any other: matched, counted, limited, hashed raw into state keys.
//! `string` and `bytes` share one wire type, so the encodings are identical.
//!
//! The domain stays a `string`: it comes from Envoy's own configuration, never from a
//! client, and a request whose domain is not UTF-8 is malformed (`INVALID_ARGUMENT`). The
//! response side keeps envoy-types' messages.

/// `envoy.service.ratelimit.v3.RateLimitRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitRequest {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitDescriptor {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
    #[prost(message, optional, tag = "2")]
    pub limit: Option<RateLimitOverride>,
    /// `google.protobuf.UInt64Value`.
    #[prost(message, optional, tag = "3")]
    pub hits_addend: Option<UInt64Value>,
    #[prost(bool, tag = "4")]
    pub is_negative_hits: bool,
}

/// `RateLimitDescriptor.Entry`, with `key` and `value` as bytes.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct Entry {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `RateLimitDescriptor.RateLimitOverride`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct RateLimitOverride {
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// `envoy.type.v3.RateLimitUnit` (an enum: the same varint as an int32).
    #[prost(int32, tag = "2")]
    pub unit: i32,
}

/// `google.protobuf.UInt64Value`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct UInt64Value {
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

impl Entry {
    pub fn new(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Entry {
        Entry {
            key: key.into(),
            value: value.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Wire compatibility with envoy-types, field by field, both ways.

    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor as PbDescriptor;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry as PbEntry, RateLimitOverride as PbOverride,
    };
    use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as PbRequest;
    use envoy_types::pb::google::protobuf::UInt64Value as PbU64;
    use prost::Message;

    use super::*;

    /// Every field set to a non-default value (and a second descriptor with defaults).
    fn theirs() -> PbRequest {
        PbRequest {
            domain: "édge".into(),
            descriptors: vec![
                PbDescriptor {
                    entries: vec![
                        PbEntry {
                            key: "remote_address".into(),
                            value: "10.0.0.1".into(),
                        },
                        PbEntry {
                            key: "path".into(),
                            value: "/ü".into(),
                        },
                    ],
                    limit: Some(PbOverride {
                        requests_per_unit: 42,
                        unit: 7,
                    }),
                    hits_addend: Some(PbU64 { value: u64::MAX }),
                    is_negative_hits: true,
                },
                PbDescriptor::default(),
            ],
            hits_addend: 3,
        }
    }

    fn ours() -> RateLimitRequest {
        RateLimitRequest {
            domain: "édge".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    entries: vec![
                        Entry::new("remote_address", "10.0.0.1"),
                        Entry::new("path", "/ü"),
                    ],
                    limit: Some(RateLimitOverride {
                        requests_per_unit: 42,
                        unit: 7,
                    }),
                    hits_addend: Some(UInt64Value { value: u64::MAX }),
                    is_negative_hits: true,
                },
                RateLimitDescriptor::default(),
            ],
            hits_addend: 3,
        }
    }

    #[test]
    fn envoy_encoding_decodes_as_ours() {
        let bytes = theirs().encode_to_vec();
        assert_eq!(RateLimitRequest::decode(&bytes[..]), Ok(ours()));
    }

    #[test]
    fn our_encoding_decodes_as_envoys() {
        let bytes = ours().encode_to_vec();
        assert_eq!(bytes, theirs().encode_to_vec(), "byte for byte");
        assert_eq!(PbRequest::decode(&bytes[..]), Ok(theirs()));
    }

    #[test]
    fn each_field_alone_round_trips() {
        let one = |d: PbDescriptor| PbRequest {
            descriptors: vec![d],
            ..Default::default()
        };
        let cases = [
            PbRequest {
                domain: "d".into(),
                ..Default::default()
            },
            PbRequest {
                hits_addend: 9,
                ..Default::default()
            },
            one(PbDescriptor {
                entries: vec![PbEntry {
                    key: "k".into(),
                    value: String::new(),
                }],
                ..Default::default()
            }),
            one(PbDescriptor {
                limit: Some(PbOverride {
                    requests_per_unit: 1,
                    unit: 0,
                }),
                ..Default::default()
            }),
            one(PbDescriptor {
                hits_addend: Some(PbU64 { value: 0 }),
                ..Default::default()
            }),
            one(PbDescriptor {
                is_negative_hits: true,
                ..Default::default()
            }),
        ];
        for theirs in cases {
            let ours = RateLimitRequest::decode(&theirs.encode_to_vec()[..]).expect("decodes");
            assert_eq!(ours.encode_to_vec(), theirs.encode_to_vec(), "{theirs:?}");
        }
    }

    #[test]
    fn values_that_are_not_utf8_decode_as_bytes() {
        let mut req = ours();
        req.descriptors[0].entries[1].value = vec![0xff, 0xfe, b'/'];
        let bytes = req.encode_to_vec();
        assert!(
            PbRequest::decode(&bytes[..]).is_err(),
            "envoy-types refuses it"
        );
        let back = RateLimitRequest::decode(&bytes[..]).expect("ours takes it");
        assert_eq!(back.descriptors[0].entries[1].value, [0xff, 0xfe, b'/']);
    }
}
