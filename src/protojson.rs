//! proto3 JSON of the well-known types inside the rate limit service's messages, for every
//! place that prints a response as JSON: `/json` (`service::json`, proto3's omit-defaults
//! form) and `sluice query --json` (`client`, every field present). `google.protobuf.Struct`
//! and `Value` (dynamic metadata), `Duration` (`"1.250s"`), `Timestamp` (RFC 3339, UTC) and
//! `bytes` (standard base64, as `raw_body`). The types are envoy-types' own, which is why this
//! module names that crate; a timestamp's date is `limit`'s (the calendar's one algorithm).

use envoy_types::pb::google::protobuf::{
    Duration, Struct, Timestamp, Value as PbValue, value::Kind,
};
use serde_json::{Value, json};

use crate::limit::calendar::civil_from_days;

/// A `Struct` as a JSON object.
pub fn struct_json(s: &Struct) -> Value {
    Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect(),
    )
}

/// A `Value` as the JSON value it stands for.
pub fn value_json(v: &PbValue) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => json!(n),
        Some(Kind::StringValue(s)) => json!(s),
        Some(Kind::BoolValue(b)) => json!(b),
        Some(Kind::StructValue(s)) => struct_json(s),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value_json).collect()),
    }
}

/// A `Duration`: seconds with 0, 3, 6 or 9 fractional digits (`"58s"`, `"1.250s"`).
pub fn duration(d: &Duration) -> String {
    let negative = d.seconds < 0 || d.nanos < 0;
    let (s, n) = (d.seconds.unsigned_abs(), d.nanos.unsigned_abs());
    let sign = if negative { "-" } else { "" };
    if n == 0 {
        format!("{sign}{s}s")
    } else if n % 1_000_000 == 0 {
        format!("{sign}{s}.{:03}s", n / 1_000_000)
    } else if n % 1_000 == 0 {
        format!("{sign}{s}.{:06}s", n / 1_000)
    } else {
        format!("{sign}{s}.{n:09}s")
    }
}

/// A `Timestamp`: RFC 3339 in UTC, `Z`, with 0, 3, 6 or 9 fractional digits.
pub fn timestamp(t: &Timestamp) -> String {
    let (year, month, day) = civil_from_days(t.seconds.div_euclid(86_400));
    let secs = t.seconds.rem_euclid(86_400);
    let fraction = duration(&Duration {
        seconds: 0,
        nanos: t.nanos.max(0),
    });
    // `0.250s` → `.250`; whole seconds have none.
    let fraction = fraction.trim_start_matches('0').trim_end_matches('s');
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{fraction}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// `bytes`: standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_base64() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        let t = |seconds, nanos| timestamp(&Timestamp { seconds, nanos });
        assert_eq!(t(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(t(1_700_006_401, 0), "2023-11-15T00:00:01Z");
        assert_eq!(t(951_782_400, 500_000_000), "2000-02-29T00:00:00.500Z");
        assert_eq!(t(-1, 0), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn durations_read_like_proto3_json() {
        let d = |seconds, nanos| duration(&Duration { seconds, nanos });
        assert_eq!(d(1, 0), "1s");
        assert_eq!(d(0, 250_000_000), "0.250s");
        assert_eq!(d(1, 250_000_000), "1.250s");
        assert_eq!(d(2, 1_000), "2.000001s");
        assert_eq!(d(0, 5), "0.000000005s");
        assert_eq!(d(-1, 0), "-1s");
    }
}
