//! A wildcard `finalKey` (`key_value` with `*`s) compiled for matching request bytes, as
//! their `wildcardMatch` does.

/// A wildcard finalKey split on `*`: each `*` matches zero or more bytes (on UTF-8 text,
/// zero or more characters, as theirs: the pieces are UTF-8, so they only ever match at
/// character boundaries).
#[derive(Debug)]
pub(super) struct Glob {
    pieces: Box<[Box<[u8]>]>,
    fixed: usize,
}

impl Glob {
    pub(super) fn new(pattern: &str) -> Option<Glob> {
        if !pattern.contains('*') {
            return None;
        }
        let pieces: Box<[Box<[u8]>]> = pattern.split('*').map(|p| p.as_bytes().into()).collect();
        let fixed = pieces.iter().map(|p| p.len()).sum();
        Some(Glob { pieces, fixed })
    }

    /// Their `wildcardMatch`: first piece a prefix, last a suffix, the middle ones found
    /// left to right in between.
    pub(super) fn matches(&self, s: &[u8]) -> bool {
        let (Some(first), Some(last)) = (self.pieces.first(), self.pieces.last()) else {
            return false;
        };
        if s.len() < self.fixed || !s.starts_with(first) || !s.ends_with(last) {
            return false;
        }
        let (mut pos, end) = (first.len(), s.len() - last.len());
        let middle = self
            .pieces
            .get(1..self.pieces.len() - 1)
            .unwrap_or_default();
        for piece in middle.iter().filter(|p| !p.is_empty()) {
            let Some(found) = s.get(pos..end).and_then(|hay| find(hay, piece)) else {
                return false;
            };
            pos += found + piece.len();
        }
        true
    }
}

/// First position of `needle` (not empty) in `hay`. Values are at most `--max-value-bytes`
/// and pieces come from the config, so the simple scan is bounded.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    (0..=last_start).find(|&i| hay[i] == first && hay[i..].starts_with(needle))
}
