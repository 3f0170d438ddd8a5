//! Request validation before any matching: their two messages for empty input, and
//! documented, configurable bounds for oversized input (each message names its bound).

use super::proto::RateLimitRequest;

use super::ServiceError;
use super::plan::override_unit;
use crate::settings::DecisionSettings;

/// Their two messages for empty input, and documented bounds for oversized input.
pub(super) fn validate(
    req: &RateLimitRequest,
    settings: &DecisionSettings,
) -> Result<(), ServiceError> {
    let bad = |m: String| Err(ServiceError::InvalidArgument(m));
    // "<what> <got>; the maximum is <max>" for every size bound.
    let bound = |got: usize, max: usize, what: &dyn Fn(usize) -> String| {
        if got > max {
            bad(format!("{}; the maximum is {max}", what(got)))
        } else {
            Ok(())
        }
    };
    let l = &settings.limits;
    if req.domain.is_empty() {
        return bad("rate limit domain must not be empty".into());
    }
    if req.descriptors.is_empty() {
        return bad("rate limit descriptor list must not be empty".into());
    }
    bound(req.domain.len(), l.max_value_bytes, &|n| {
        format!("domain is {n} bytes")
    })?;
    bound(req.descriptors.len(), l.max_descriptors, &|n| {
        format!("request has {n} descriptors")
    })?;
    if u64::from(req.hits_addend) > l.max_hits_addend {
        return bad(format!(
            "hits_addend {} exceeds the maximum {}",
            req.hits_addend, l.max_hits_addend
        ));
    }
    for (i, d) in req.descriptors.iter().enumerate() {
        bound(d.entries.len(), l.max_entries, &|n| {
            format!("descriptor {i} has {n} entries")
        })?;
        for (j, e) in d.entries.iter().enumerate() {
            bound(e.key.len(), l.max_key_bytes, &|n| {
                format!("descriptor {i} entry {j}: key is {n} bytes")
            })?;
            bound(e.value.len(), l.max_value_bytes, &|n| {
                format!("descriptor {i} entry {j}: value is {n} bytes")
            })?;
        }
        if let Some(h) = &d.hits_addend
            && h.value > l.max_hits_addend
        {
            return bad(format!(
                "descriptor {i}: hits_addend {} exceeds the maximum {}",
                h.value, l.max_hits_addend
            ));
        }
        if let Some(o) = &d.limit {
            override_unit(o.unit)
                .map_err(|e| ServiceError::InvalidArgument(format!("descriptor {i}: {e}")))?;
        }
    }
    Ok(())
}
