//! Matching → plans: each request descriptor against the active config's rule tree (or its
//! `limit` override), then their `replaces`. The plan says which limits, which state and
//! what cost; nothing here touches the store.

use super::proto::RateLimitDescriptor;

use super::{RateLimitService, ServiceError};
use crate::config::{self, Match};
use crate::limit::{Consistency, LimitSpec, Unit};
use crate::limiter::{LimitSet, Metered, Plan};

/// A descriptor's match, kept for statistics and metadata after the decision.
pub(super) struct Matched<'a> {
    pub(super) m: Option<Match<'a>>,
    /// Stats key of a request override.
    pub(super) override_key: Option<String>,
}

impl RateLimitService {
    pub(super) fn plan<'a>(
        &self,
        domain_name: &str,
        domain: Option<&'a config::Domain>,
        d: &RateLimitDescriptor,
        request_cost: u64,
    ) -> Result<(Plan<'a>, Matched<'a>), ServiceError> {
        let none = Matched {
            m: None,
            override_key: None,
        };
        let Some(domain) = domain else {
            return Ok((Plan::NoLimit, none));
        };
        let cost = d.hits_addend.as_ref().map_or(request_cost, |h| h.value);
        if let Some(o) = &d.limit {
            // Their semantics: an override bypasses the tree and is a fixed window.
            let unit = override_unit(o.unit)?;
            let plan = Plan::Metered(Metered {
                limits: LimitSet::Override(LimitSpec::fixed_window(
                    u64::from(o.requests_per_unit),
                    unit,
                )),
                tag: config::override_state_tag(domain_name, &d.entries),
                cost,
                refund: d.is_negative_hits,
                shadow: false,
                quota: self.settings.quota_mode,
                reference_key: self
                    .settings
                    .reference_keys
                    .then(|| config::override_reference_cache_key(domain_name, &d.entries).into()),
            });
            let key = domain.override_stats_key(&d.entries);
            return Ok((
                plan,
                Matched {
                    m: None,
                    override_key: Some(key),
                },
            ));
        }
        let Some(m) = domain.find(&d.entries) else {
            return Ok((Plan::NoLimit, none));
        };
        let plan = if m.rule.unlimited {
            Plan::Unlimited
        } else {
            Plan::Metered(Metered {
                limits: LimitSet::Rule(&m.rule.limits),
                tag: m.state_tag(&d.entries),
                cost,
                refund: d.is_negative_hits,
                shadow: m.rule.shadow_mode,
                quota: m.rule.quota_mode || self.settings.quota_mode,
                reference_key: self
                    .settings
                    .reference_keys
                    .then(|| m.reference_cache_key(&d.entries).into()),
            })
        };
        Ok((
            plan,
            Matched {
                m: Some(m),
                override_key: None,
            },
        ))
    }
}

impl RateLimitService {
    /// Per plan: decided in batched mode (its rule's `consistency`, else `--consistency`
    /// where the rule's algorithms allow it). Request overrides are strict. Empty without a
    /// local view.
    pub(super) fn batched(&self, plans: &[Plan<'_>], matched: &[Matched<'_>]) -> Vec<bool> {
        if self.view.is_none() {
            return Vec::new();
        }
        plans
            .iter()
            .zip(matched)
            .map(|(p, m)| {
                let (Plan::Metered(_), Some(m)) = (p, &m.m) else {
                    return false;
                };
                let rule = m.rule;
                let sound = rule
                    .limits
                    .iter()
                    .all(|l| Consistency::sound_for(l.algorithm));
                let c = rule.consistency.unwrap_or(if sound {
                    self.consistency
                } else {
                    Consistency::Strict
                });
                c == Consistency::Batched
            })
            .collect()
    }
}

/// Their `replaces`: every name replaced by any matched rule (unlimited ones included)
/// drops the limited rules carrying that name.
pub(super) fn apply_replaces(plans: &mut [Plan<'_>], matched: &[Matched<'_>]) {
    let replaced: Vec<&str> = matched
        .iter()
        .filter_map(|m| m.m.as_ref())
        .flat_map(|m| m.rule.replaces.iter().map(|r| &**r))
        .collect();
    if replaced.is_empty() {
        return;
    }
    for (plan, m) in plans.iter_mut().zip(matched) {
        if let (Plan::Metered(_), Some(mm)) = (&*plan, &m.m)
            && mm.rule.names().any(|n| replaced.contains(&n))
        {
            *plan = Plan::NoLimit;
        }
    }
}

/// A request override's unit: the number is read as the response's unit enum (their
/// behaviour, so WEEK = 7 works); UNKNOWN is rejected instead of crashing as theirs does.
pub(super) fn override_unit(raw: i32) -> Result<Unit, ServiceError> {
    Ok(match raw {
        1 => Unit::Second,
        2 => Unit::Minute,
        3 => Unit::Hour,
        4 => Unit::Day,
        5 => Unit::Month,
        6 => Unit::Year,
        7 => Unit::Week,
        other => {
            return Err(ServiceError::InvalidArgument(format!(
                "rate limit override has an unknown unit ({other})"
            )));
        }
    })
}
