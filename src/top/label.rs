//! A tracked descriptor: its key (its rule and entries, length-prefixed, hashed with a seed
//! this process drew at random) and its label (the rule cut to [`MAX_RULE_BYTES`], then at
//! most [`MAX_ENTRIES`] entries, each key and value cut to [`MAX_PART_BYTES`]: what `/top`
//! shows, at most [`MAX_LABEL_BYTES`]).
//!
//! The key is exact identity for practical purposes: two descriptors share a key only by a
//! collision of a seeded 64-bit hash, which a client cannot aim for without the seed (nor
//! crowd one slot of the summary's index, which uses the key as its hash). The label is
//! bounded, so a counter's memory is bounded whatever a client sends.

use std::cell::RefCell;

/// Longest rule a label keeps (longer ones are cut, and marked so).
pub const MAX_RULE_BYTES: usize = 96;

/// Longest entry key or value a label keeps (longer ones are cut, and marked so).
pub const MAX_PART_BYTES: usize = 48;

/// Most entries a label keeps (a marker says when there were more).
pub const MAX_ENTRIES: usize = 4;

/// The longest label: each part with its length byte, and the marker.
pub const MAX_LABEL_BYTES: usize = 1 + MAX_RULE_BYTES + MAX_ENTRIES * 2 * (1 + MAX_PART_BYTES) + 1;

/// A part's length byte: the bytes kept (at most [`MAX_PART_BYTES`]), plus this bit when
/// the part was longer.
const CUT: u8 = 0x80;

thread_local! {
    /// The identity bytes of the descriptor being hashed (reused: no allocation per hit).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// One part of a label: bytes as they came, and whether more followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub bytes: &'a [u8],
    pub cut: bool,
}

/// A label read back: the rule and the entries it kept.
#[derive(Debug, PartialEq, Eq)]
pub struct Shown<'a> {
    pub rule: Part<'a>,
    pub entries: Vec<(Part<'a>, Part<'a>)>,
    /// Entries past the first [`MAX_ENTRIES`] were not kept.
    pub more_entries: bool,
}

/// The key of (`rule`, `entries`) under `seed`.
pub fn key<'e>(seed: u64, rule: &str, entries: impl Iterator<Item = (&'e [u8], &'e [u8])>) -> u64 {
    SCRATCH.with_borrow_mut(|buf| {
        buf.clear();
        let mut part = |bytes: &[u8]| {
            buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            buf.extend_from_slice(bytes);
        };
        part(rule.as_bytes());
        for (k, v) in entries {
            part(k);
            part(v);
        }
        xxhash_rust::xxh3::xxh3_64_with_seed(buf, seed)
    })
}

/// The label of (`rule`, `entries`), allocated once at its size.
pub fn label<'e>(
    rule: &str,
    entries: impl Iterator<Item = (&'e [u8], &'e [u8])> + Clone,
) -> Box<[u8]> {
    let mut size = 1 + rule.len().min(MAX_RULE_BYTES);
    for (count, (k, v)) in entries.clone().enumerate() {
        if count == MAX_ENTRIES {
            size += 1;
            break;
        }
        size += 2 + k.len().min(MAX_PART_BYTES) + v.len().min(MAX_PART_BYTES);
    }
    let mut out = Vec::with_capacity(size);
    let mut push = |bytes: &[u8], max: usize| {
        let kept = bytes.len().min(max);
        let cut = if bytes.len() > kept { CUT } else { 0 };
        out.push(kept as u8 | cut);
        out.extend_from_slice(&bytes[..kept]);
    };
    push(rule.as_bytes(), MAX_RULE_BYTES);
    let mut more = false;
    for (kept, (k, v)) in entries.enumerate() {
        if kept == MAX_ENTRIES {
            more = true;
            break;
        }
        push(k, MAX_PART_BYTES);
        push(v, MAX_PART_BYTES);
    }
    if more {
        // A lone length byte of 0 with the cut bit: "entries followed".
        out.push(CUT);
    }
    out.into_boxed_slice()
}

/// Read a label back.
pub fn read(label: &[u8]) -> Shown<'_> {
    let mut rest = label;
    let mut next = || -> Option<Part<'_>> {
        let (&len, tail) = rest.split_first()?;
        let n = usize::from(len & !CUT).min(tail.len());
        let (bytes, tail) = tail.split_at(n);
        rest = tail;
        Some(Part {
            bytes,
            cut: len & CUT != 0,
        })
    };
    let rule = next().unwrap_or(Part {
        bytes: &[],
        cut: false,
    });
    let mut entries = Vec::new();
    let mut more_entries = false;
    while let Some(k) = next() {
        match next() {
            Some(v) => entries.push((k, v)),
            // The marker: a lone empty, cut part.
            None => more_entries = k.cut && k.bytes.is_empty(),
        }
    }
    Shown {
        rule,
        entries,
        more_entries,
    }
}
