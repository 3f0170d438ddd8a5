//! Heavy hitters: per domain, the descriptors with the most hits and the most denials over a
//! recent window, from memory bounded by a setting, never by the number of distinct values.
//!
//! Each domain has a recent window (`window.rs`): two halves of `window / 2` aligned to
//! the Unix epoch, so a reading covers between half the window and the whole of it. Each
//! half has two Space-Saving summaries (`sketch.rs`) of `capacity` counters, one weighted
//! by hits, one by denials (hits over the limit, shadow mode included: who would be
//! limited). A count shown is within `N / capacity` of the true count, `N` being the
//! domain's hits (or denials) in the window, and exact while no half saw more than
//! `capacity` descriptors; every descriptor heavier than `N / capacity` is held, and one
//! heavier than another by more than `2N / capacity` is listed before it.
//!
//! Memory: a domain holds at most `4 × capacity` counters (two halves, two summaries), each
//! at most [`MAX_COUNTER_BYTES`] (its label cut to [`MAX_LABEL_BYTES`]); only domains of the loaded config are tracked, and a reload
//! drops those it removes. Time is the injected [`Clock`], read once per request.
//!
//! A descriptor is its rule (`full_key`, the config path `/rlconfig` shows) and its entries
//! as sent (`label.rs`): two values of a `share_threshold` glob are two descriptors here,
//! though they share one counter in the store.

mod label;
mod sketch;
mod window;

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

pub use label::{
    MAX_ENTRIES, MAX_LABEL_BYTES, MAX_PART_BYTES, MAX_RULE_BYTES, Part, Shown, read as read_label,
};
pub use window::{By, Ranked, Ranking};

use crate::limit::Clock;
use window::Recent;

/// The most memory one counter takes, label included (a `SpaceSaving` slot, its index
/// entry and heap place, the label's allocation rounded up): the figure the memory bound
/// is stated with (`docs/reference/caps-and-limits.md`).
pub const MAX_COUNTER_BYTES: usize = 1024;

/// How the heavy hitters are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopOptions {
    /// Counters per summary (`--top-capacity`).
    pub capacity: usize,
    /// The window a reading covers at most (`--top-window`), in milliseconds (at least 2).
    pub window_ms: u64,
}

/// Every domain's recent window.
pub struct TopHitters {
    opts: TopOptions,
    clock: Arc<dyn Clock>,
    /// Drawn at startup: keys are seeded hashes (`label.rs`).
    seed: u64,
    /// By domain name, hashed with [`NameHasher`]: a lookup per request, and only the
    /// loaded config's domains are ever inserted (a client cannot flood it).
    domains: RwLock<Windows>,
}

/// Each domain's window, by name.
type Windows = HashMap<Box<str>, Arc<Mutex<Recent>>, BuildHasherDefault<NameHasher>>;

/// One-shot xxh3 of each write: a short name costs a few dozen instructions, where SipHash
/// (the map's default) and xxh3's streaming state cost hundreds.
#[derive(Default)]
pub struct NameHasher(u64);

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
}

impl TopHitters {
    pub fn new(opts: TopOptions, clock: Arc<dyn Clock>) -> TopHitters {
        TopHitters {
            opts,
            clock,
            seed: std::collections::hash_map::RandomState::new().hash_one(0x70_u64),
            domains: RwLock::new(HashMap::default()),
        }
    }

    pub fn options(&self) -> TopOptions {
        self.opts
    }

    fn window(&self, domain: &str) -> Arc<Mutex<Recent>> {
        if let Some(w) = self.domains.read().get(domain) {
            return w.clone();
        }
        self.domains
            .write()
            .entry(domain.into())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Recent::new(
                    self.opts.capacity,
                    (self.opts.window_ms / 2).max(1),
                )))
            })
            .clone()
    }

    /// One descriptor of a decided request: `cost` hits on `rule` of `domain`, `denied` or
    /// not. The caller passes only domains of the loaded config.
    pub fn observe<'e, I>(&self, domain: &str, rule: &str, entries: I, cost: u64, denied: bool)
    where
        I: Iterator<Item = (&'e [u8], &'e [u8])> + Clone,
    {
        let key = label::key(self.seed, rule, entries.clone());
        let now = self.clock.now_ms();
        let window = self.window(domain);
        window.lock().add(now, key, cost, denied, || {
            label::label(rule, entries.clone())
        });
    }

    /// The `n` heaviest descriptors of `domain` by `by` (an empty ranking for a domain with
    /// no hits yet).
    pub fn rank(&self, domain: &str, by: By, n: usize) -> Ranking {
        let now = self.clock.now_ms();
        match self.domains.read().get(domain).cloned() {
            Some(w) => w.lock().rank(now, by, n),
            None => Recent::new(1, (self.opts.window_ms / 2).max(1)).rank(now, by, n),
        }
    }

    /// The domains with a window, in name order.
    pub fn domains(&self) -> Vec<String> {
        let mut names: Vec<String> = self.domains.read().keys().map(|d| d.to_string()).collect();
        names.sort_unstable();
        names
    }

    /// Drop the windows of domains `keep` refuses (after a reload removed them).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.domains.write().retain(|d, _| keep(d));
    }
}

#[cfg(test)]
mod tests;
