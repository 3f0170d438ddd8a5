//! Requests for a domain no rule file declares are answered OK without a limit (their
//! behaviour) and counted (`sluice_domain_not_found_total`); this says so in the log, naming
//! the domain, at most once a minute per domain. The domains are the clients' to choose, so
//! the table that remembers when each was last named is bounded: past [`MAX_DOMAINS`]
//! named in the last minute, one line a minute says that more were not named.
//!
//! How often a line may be logged is a duration, measured with `Instant` as timeouts are;
//! it is not the clock limits are decided on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Most domains remembered at once.
pub const MAX_DOMAINS: usize = 1024;

/// How long a domain, once named, is not named again.
pub const EVERY: Duration = Duration::from_secs(60);

/// Longest part of a domain a log line shows (characters).
const SHOWN_CHARS: usize = 128;

#[derive(Default)]
pub struct UnknownDomains {
    inner: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// When each domain was last named.
    named: HashMap<String, Instant>,
    /// When the line about unnamed domains was last logged.
    overflow: Option<Instant>,
}

/// What to log for one request for an unknown domain.
#[derive(Debug, PartialEq, Eq)]
pub enum Say {
    /// Name the domain.
    Name,
    /// The table is full of domains named in the last minute: say that there are more.
    More,
    Nothing,
}

impl UnknownDomains {
    /// What to log for a request for `domain` at `now`.
    pub fn at(&self, domain: &str, now: Instant) -> Say {
        let mut t = self.inner.lock();
        let recent = |at: &Instant| now.saturating_duration_since(*at) < EVERY;
        if let Some(at) = t.named.get_mut(domain) {
            if recent(at) {
                return Say::Nothing;
            }
            *at = now;
            return Say::Name;
        }
        if t.named.len() >= MAX_DOMAINS {
            t.named.retain(|_, at| recent(at));
        }
        if t.named.len() < MAX_DOMAINS {
            t.named.insert(domain.to_owned(), now);
            return Say::Name;
        }
        if t.overflow.as_ref().is_some_and(recent) {
            return Say::Nothing;
        }
        t.overflow = Some(now);
        Say::More
    }

    /// Log for a request for `domain` (see the module comment).
    pub fn note(&self, domain: &str) {
        match self.at(domain, Instant::now()) {
            Say::Name => tracing::warn!(
                domain = %shown(domain),
                "request for a domain no rule file declares: answered OK without a limit \
                 (counted in sluice_domain_not_found_total; said once a minute per domain)"
            ),
            Say::More => tracing::warn!(
                domains = MAX_DOMAINS,
                "requests for more unknown domains than are named in a minute: the rest are \
                 counted in sluice_domain_not_found_total without a log line"
            ),
            Say::Nothing => {}
        }
    }
}

/// `domain` for a log line: its first characters, control characters escaped.
pub fn shown(domain: &str) -> String {
    let mut out: String = domain
        .chars()
        .take(SHOWN_CHARS)
        .flat_map(char::escape_debug)
        .collect();
    if domain.chars().nth(SHOWN_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_is_named_once_a_minute() {
        let u = UnknownDomains::default();
        let t0 = Instant::now();
        assert_eq!(u.at("shop", t0), Say::Name);
        assert_eq!(u.at("shop", t0 + Duration::from_secs(59)), Say::Nothing);
        assert_eq!(
            u.at("edge", t0 + Duration::from_secs(59)),
            Say::Name,
            "per domain"
        );
        assert_eq!(u.at("shop", t0 + EVERY), Say::Name);
    }

    #[test]
    fn the_table_is_bounded_and_says_when_domains_go_unnamed() {
        let u = UnknownDomains::default();
        let t0 = Instant::now();
        for i in 0..MAX_DOMAINS {
            assert_eq!(u.at(&format!("d{i}"), t0), Say::Name);
        }
        assert_eq!(u.at("one-more", t0), Say::More);
        assert_eq!(u.at("and-another", t0), Say::Nothing, "said once a minute");
        // A minute on, the old names make room.
        assert_eq!(u.at("one-more", t0 + EVERY), Say::Name);
        assert!(u.inner.lock().named.len() <= MAX_DOMAINS);
    }

    #[test]
    fn shown_domains_are_bounded_and_escaped() {
        assert_eq!(shown("shop"), "shop");
        assert_eq!(shown("a\nb\"c"), "a\\nb\\\"c");
        let long = "x".repeat(1000);
        assert_eq!(shown(&long).chars().count(), SHOWN_CHARS + 1);
    }
}
