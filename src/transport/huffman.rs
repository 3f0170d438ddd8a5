//! HPACK's Huffman code (RFC 7541, Appendix B), decoding only: the header fields a gRPC client
//! sends are mostly Huffman-coded, and `authority.rs` must read them as h2 will.
//!
//! The code is canonical (codes of one length are consecutive, in symbol order, and each
//! length's first code follows the previous length's last), so the 257 code lengths define it
//! whole: the decoder walks the bits with the per-length counts (as zlib's `puff` does)
//! instead of carrying the table of codes.

/// Each symbol's code length in bits: bytes 0 to 255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const EOS: u16 = 256;
const MAX_BITS: usize = 30;

/// How many codes each length has, and the symbols in code order.
struct Canonical {
    counts: [u16; MAX_BITS + 1],
    symbols: [u16; 257],
}

const CANONICAL: Canonical = {
    let mut counts = [0u16; MAX_BITS + 1];
    let mut symbols = [0u16; 257];
    let mut next = 0;
    let mut len = 1;
    while len <= MAX_BITS {
        let mut sym = 0;
        while sym < LENGTHS.len() {
            if LENGTHS[sym] as usize == len {
                counts[len] += 1;
                symbols[next] = sym as u16;
                next += 1;
            }
            sym += 1;
        }
        len += 1;
    }
    Canonical { counts, symbols }
};

/// A string that is not valid Huffman code: an EOS symbol in it, a code longer than any,
/// or padding that is not the EOS prefix or is 8 bits or longer (RFC 7541, 5.2).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BadHuffman;

/// Decode `src` into `out` (appended).
pub(super) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), BadHuffman> {
    let c = &CANONICAL;
    // The code read so far, the first code of its length, where that length's symbols start.
    let (mut code, mut first, mut index, mut len) = (0u32, 0u32, 0usize, 0usize);
    for byte in src {
        for shift in (0..8).rev() {
            code |= u32::from(byte >> shift) & 1;
            len += 1;
            let count = u32::from(c.counts[len]);
            if code < first + count {
                let sym = c.symbols[index + (code - first) as usize];
                if sym == EOS {
                    return Err(BadHuffman);
                }
                out.push(sym as u8);
                (code, first, index, len) = (0, 0, 0, 0);
                continue;
            }
            if len == MAX_BITS {
                return Err(BadHuffman);
            }
            index += count as usize;
            first = (first + count) << 1;
            code <<= 1;
        }
    }
    // What is left is padding: fewer than 8 bits, all ones (a prefix of EOS). `code` was
    // shifted once past its last bit.
    let ones = (1u32 << (len + 1)) - 2;
    if len >= 8 || (len > 0 && code != ones) {
        return Err(BadHuffman);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decoded(s: &str) -> Result<Vec<u8>, BadHuffman> {
        let mut out = Vec::new();
        decode(&hex(s), &mut out).map(|()| out)
    }

    /// The canonical codes, rebuilt from the lengths: what an encoder would emit.
    fn codes() -> Vec<(u32, u8)> {
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (LENGTHS[s], s));
        let mut codes = vec![(0u32, 0u8); 257];
        let (mut code, mut prev) = (0u32, LENGTHS[order[0]]);
        for (i, &s) in order.iter().enumerate() {
            if i > 0 {
                code = (code + 1) << (LENGTHS[s] - prev);
            }
            prev = LENGTHS[s];
            codes[s] = (code, LENGTHS[s]);
        }
        codes
    }

    fn encode(src: &[u8]) -> Vec<u8> {
        let codes = codes();
        let (mut acc, mut bits, mut out) = (0u64, 0u32, Vec::new());
        for &b in src {
            let (code, len) = codes[b as usize];
            acc = (acc << len) | u64::from(code);
            bits += u32::from(len);
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
        }
        out
    }

    #[test]
    fn decodes_the_rfc_examples() {
        // RFC 7541, C.4.1 to C.4.3.
        assert_eq!(
            decoded("f1e3 c2e5 f23a 6ba0 ab90 f4ff").unwrap(),
            b"www.example.com"
        );
        assert_eq!(decoded("a8eb 1064 9cbf").unwrap(), b"no-cache");
        assert_eq!(decoded("25a8 49e9 5ba9 7d7f").unwrap(), b"custom-key");
        assert_eq!(decoded("25a8 49e9 5bb8 e8b4 bf").unwrap(), b"custom-value");
        assert_eq!(decoded("").unwrap(), b"");
    }

    #[test]
    fn the_lengths_make_the_rfc_codes() {
        let codes = codes();
        // RFC 7541, Appendix B: a few codes of each length range.
        assert_eq!(codes[b'0' as usize], (0x0, 5));
        assert_eq!(codes[b' ' as usize], (0x14, 6));
        assert_eq!(codes[0], (0x1ff8, 13));
        assert_eq!(codes[255], (0x3ffffee, 26));
        assert_eq!(codes[256], (0x3fffffff, 30));
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        decode(&encode(&all), &mut out).unwrap();
        assert_eq!(out, all);
        for b in 0..=255u8 {
            let mut out = Vec::new();
            decode(&encode(&[b, b'/', b]), &mut out).unwrap();
            assert_eq!(out, [b, b'/', b]);
        }
    }

    #[test]
    fn refuses_bad_padding_and_eos() {
        // "0" is 00000; padded with zeros instead of ones.
        assert_eq!(decoded("00"), Err(BadHuffman));
        // A whole byte of padding (8 ones) after a full symbol.
        assert_eq!(decoded("07 ff"), Err(BadHuffman));
        // EOS itself (30 ones), padded.
        assert_eq!(decoded("ff ff ff ff"), Err(BadHuffman));
    }
}
