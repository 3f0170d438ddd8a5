use std::collections::HashMap;
use std::sync::Arc;

use super::label;
use super::sketch::{SLOT_BYTES, SpaceSaving};
use super::*;
use crate::limit::ManualClock;

const HALF_MS: u64 = 30_000;
/// The start of a half, so a test knows where in the window it stands.
const T0: u64 = 1_700_000_010_000 / HALF_MS * HALF_MS;

fn hitters(capacity: usize) -> (TopHitters, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = TopOptions {
        capacity,
        window_ms: 2 * HALF_MS,
    };
    (TopHitters::new(opts, clock.clone()), clock)
}

fn hit(t: &TopHitters, value: &str, cost: u64, denied: bool) {
    let entries = [(b"user".as_slice(), value.as_bytes())];
    t.observe("d", "d.user", entries.into_iter(), cost, denied);
}

/// The value of a ranked descriptor's one entry.
fn value(r: &Ranked) -> String {
    let shown = label::read(&r.label);
    assert_eq!(shown.rule.bytes, b"d.user");
    String::from_utf8(shown.entries[0].1.bytes.to_vec()).expect("utf-8")
}

/// xorshift64*: a reproducible stream without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn counts_are_exact_below_the_capacity() {
    let (t, _) = hitters(10);
    for (v, n) in [("a", 5), ("b", 3), ("c", 1)] {
        for _ in 0..n {
            hit(&t, v, 1, v == "b");
        }
    }
    let r = t.rank("d", By::Hits, 10);
    let got: Vec<(String, u64, u64)> = r.top.iter().map(|x| (value(x), x.hits, x.denied)).collect();
    assert_eq!(
        got,
        [("a".into(), 5, 0), ("b".into(), 3, 3), ("c".into(), 1, 0)]
    );
    assert_eq!(
        (r.hits, r.denied, r.hits_error, r.denied_error),
        (9, 3, 0, 0)
    );
    let denied = t.rank("d", By::Denied, 10);
    assert_eq!(
        denied.top.len(),
        1,
        "only denied descriptors rank by denials"
    );
    assert_eq!(value(&denied.top[0]), "b");
}

/// A Zipf mix over 400 values with two heavy hitters, through 100 counters: the two come
/// first, in order, and every count shown is within the stated bound of the true one.
#[test]
fn a_zipf_mix_keeps_its_heavy_hitters_within_the_error_bound() {
    let capacity = 100;
    let (t, clock) = hitters(capacity);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Zipf (s = 1) over 400 values: the cumulative weights to sample from.
    let values = 400;
    let weights: Vec<f64> = (1..=values).map(|i| 1.0 / f64::from(i)).collect();
    let sum: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(weights.len());
    let mut acc = 0.0;
    for w in &weights {
        acc += w / sum;
        cumulative.push(acc);
    }
    let mut truth: HashMap<String, (u64, u64)> = HashMap::new();
    let total = 60_000;
    for i in 0..total {
        // Two halves of the window: half of the hits before the boundary, half after.
        if i == total / 2 {
            clock.advance(HALF_MS);
        }
        let p = rng.unit();
        let (v, denied) = if p < 0.30 {
            ("heavy-a".to_owned(), false)
        } else if p < 0.50 {
            // Denied most of the time: the heaviest by denials.
            ("heavy-b".to_owned(), rng.unit() < 0.9)
        } else {
            let u = rng.unit();
            let rank = cumulative
                .partition_point(|&c| c < u)
                .min(values as usize - 1);
            (format!("z{rank}"), rng.unit() < 0.05)
        };
        let cost = 1 + rng.next() % 3;
        hit(&t, &v, cost, denied);
        let e = truth.entry(v).or_default();
        e.0 += cost;
        if denied {
            e.1 += cost;
        }
    }
    assert!(truth.len() > 300, "{} distinct values", truth.len());
    let n_hits: u64 = truth.values().map(|e| e.0).sum();
    let n_denied: u64 = truth.values().map(|e| e.1).sum();

    let r = t.rank("d", By::Hits, 20);
    assert_eq!((r.hits, r.denied), (n_hits, n_denied));
    assert!(
        r.hits_error > 0,
        "the summaries overflowed: the bound is exercised"
    );
    assert!(r.hits_error <= n_hits / capacity as u64, "{r:?}");
    assert!(r.denied_error <= n_denied / capacity as u64, "{r:?}");
    let order: Vec<String> = r.top.iter().map(value).collect();
    assert_eq!(order[..2], ["heavy-a", "heavy-b"], "{order:?}");
    for x in &r.top {
        let (hits, denied) = truth[&value(x)];
        assert!(
            x.hits.abs_diff(hits) <= r.hits_error,
            "{}: {} vs {hits}",
            value(x),
            x.hits
        );
        assert!(
            x.denied.abs_diff(denied) <= r.denied_error,
            "{}: {} vs {denied}",
            value(x),
            x.denied
        );
    }
    // Heaviest first.
    assert!(r.top.windows(2).all(|w| w[0].hits >= w[1].hits));

    let d = t.rank("d", By::Denied, 5);
    assert_eq!(value(&d.top[0]), "heavy-b");
    for x in &d.top {
        let (_, denied) = truth[&value(x)];
        assert!(x.denied.abs_diff(denied) <= d.denied_error);
    }
}

#[test]
fn the_window_forgets_what_is_older_than_the_half_before_this_one() {
    let (t, clock) = hitters(10);
    hit(&t, "old", 5, false);
    clock.advance(HALF_MS);
    hit(&t, "recent", 2, false);
    let r = t.rank("d", By::Hits, 10);
    assert_eq!(r.top.len(), 2, "the half before this one is read");
    assert_eq!(r.since_ms, T0);
    clock.advance(HALF_MS);
    let r = t.rank("d", By::Hits, 10);
    assert_eq!(r.top.iter().map(value).collect::<Vec<_>>(), ["recent"]);
    assert_eq!(r.since_ms, T0 + HALF_MS);
    // A long silence empties both halves.
    clock.advance(10 * HALF_MS);
    assert!(t.rank("d", By::Hits, 10).top.is_empty());
}

#[test]
fn a_sketch_replaces_its_smallest_counter_and_records_its_error() {
    let mut s = SpaceSaving::new(2);
    let l = || Box::<[u8]>::from(&b"x"[..]);
    s.add(1, 5, l);
    s.add(2, 3, l);
    assert_eq!(s.floor(), 3, "full: the smallest count");
    s.add(3, 1, l);
    assert_eq!(s.get(2), None, "the smallest was taken over");
    assert_eq!(s.get(3), Some((4, 3)));
    assert_eq!(s.get(1), Some((5, 0)));
    assert_eq!(s.total(), 9);
    s.clear();
    assert_eq!((s.total(), s.floor(), s.get(1)), (0, 0, None));
}

#[test]
fn labels_keep_the_first_bytes_of_each_part_and_say_so() {
    let long = vec![b'v'; 100];
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                if i == 0 { long.clone() } else { b"x".to_vec() },
            )
        })
        .collect();
    let l = label::label("d.k0", entries.iter().map(|(k, v)| (&k[..], &v[..])));
    let shown = label::read(&l);
    assert_eq!(shown.rule.bytes, b"d.k0");
    assert_eq!(shown.entries.len(), MAX_ENTRIES);
    assert!(shown.more_entries);
    let (k, v) = shown.entries[0];
    assert_eq!((k.bytes, k.cut), (&b"k0"[..], false));
    assert_eq!((v.bytes.len(), v.cut), (MAX_PART_BYTES, true));
    assert!(l.len() <= MAX_LABEL_BYTES);
    let rule = "r".repeat(200);
    let longest: Vec<Vec<u8>> = (0..6).map(|_| vec![b'x'; 100]).collect();
    let l = label::label(&rule, longest.iter().map(|v| (&v[..], &v[..])));
    assert_eq!(l.len(), MAX_LABEL_BYTES, "the longest label");
    assert_eq!(label::read(&l).rule.bytes.len(), MAX_RULE_BYTES);

    let short = label::label("d.k", [(&b"k"[..], &b""[..])].into_iter());
    let shown = label::read(&short);
    assert!(!shown.more_entries);
    assert_eq!(shown.entries.len(), 1);
}

#[test]
fn keys_tell_descriptors_apart_by_rule_and_entries() {
    let k = |rule: &str, e: &[(&str, &str)]| {
        label::key(7, rule, e.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())))
    };
    assert_eq!(k("d.a", &[("a", "1")]), k("d.a", &[("a", "1")]));
    assert_ne!(k("d.a", &[("a", "1")]), k("d.b", &[("a", "1")]));
    // Length prefixes: moving bytes between parts is another descriptor.
    assert_ne!(k("d.a", &[("ab", "c")]), k("d.a", &[("a", "bc")]));
    assert_ne!(
        label::key(7, "d.a", [(&b"a"[..], &b"1"[..])].into_iter()),
        label::key(8, "d.a", [(&b"a"[..], &b"1"[..])].into_iter()),
        "the seed changes every key"
    );
}

/// The figure the memory bound is stated with holds: a counter's slot, index entry
/// (hashbrown keeps at most twice the entries it holds, plus a control byte each), heap
/// place and the largest label, rounded up to the allocator's size class.
#[test]
fn a_counter_fits_the_stated_bytes() {
    let label_allocated = MAX_LABEL_BYTES.next_power_of_two();
    let index = 2 * (std::mem::size_of::<(u64, u32)>() + 1);
    assert!(SLOT_BYTES + index + 4 + label_allocated <= MAX_COUNTER_BYTES);
}

#[test]
fn domains_are_dropped_when_a_reload_removes_them() {
    let (t, _) = hitters(4);
    hit(&t, "a", 1, false);
    t.observe("other", "other.k", std::iter::empty(), 1, false);
    assert_eq!(t.domains(), ["d", "other"]);
    t.retain(|d| d == "d");
    assert_eq!(t.domains(), ["d"]);
}
