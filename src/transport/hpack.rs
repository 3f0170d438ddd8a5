//! HPACK (RFC 7541) as a server reads a client's header blocks: decoding against the dynamic
//! table the client's encoder fills, and writing fields back as literals that refer to no
//! table, so a block can be rewritten without the two sides' tables parting (`authority.rs`).

use std::collections::VecDeque;

use bytes::Bytes;

use super::huffman;

/// The dynamic table's largest size: `SETTINGS_HEADER_TABLE_SIZE`, which the HTTP/2 server
/// leaves at the protocol's default. A client may only shrink its table below it.
pub(super) const TABLE_LIMIT: usize = 4096;

/// A block this decoder cannot read (h2 cannot either: it answers with a connection error).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BadBlock(pub(super) &'static str);

/// One header field of a block, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Field {
    pub(super) name: Bytes,
    pub(super) value: Bytes,
    /// Sent as "never indexed" (a sensitive value): kept so on a rewrite.
    pub(super) never_indexed: bool,
}

/// A decoded block: its dynamic table size updates (which open a block), then its fields.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Block {
    pub(super) size_updates: Vec<usize>,
    pub(super) fields: Vec<Field>,
}

/// The client's dynamic table, as its encoder keeps it.
#[derive(Debug)]
pub(super) struct Decoder {
    entries: VecDeque<(Bytes, Bytes)>,
    /// The entries' size (RFC 7541, 4.1: name + value + 32 each).
    size: usize,
    max: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            entries: VecDeque::new(),
            size: 0,
            max: TABLE_LIMIT,
        }
    }
}

impl Decoder {
    /// Decode one whole header block (the fragments of a HEADERS frame and its
    /// CONTINUATIONs, joined), updating the table as the client's encoder did.
    pub(super) fn decode(&mut self, mut src: &[u8]) -> Result<Block, BadBlock> {
        let mut block = Block::default();
        while let Some(&first) = src.first() {
            if first & 0x80 != 0 {
                // Indexed field.
                let index = integer(&mut src, 7)?;
                let (name, value) = self.get(index)?;
                block.fields.push(Field {
                    name,
                    value,
                    never_indexed: false,
                });
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing.
                let (name, value) = self.literal(&mut src, 6)?;
                self.insert(name.clone(), value.clone());
                block.fields.push(Field {
                    name,
                    value,
                    never_indexed: false,
                });
            } else if first & 0x20 != 0 {
                // Dynamic table size update: only before the block's first field.
                if !block.fields.is_empty() {
                    return Err(BadBlock("table size update after a field"));
                }
                let size = integer(&mut src, 5)?;
                if size > TABLE_LIMIT {
                    return Err(BadBlock("table size over the limit"));
                }
                self.max = size;
                self.evict(0);
                block.size_updates.push(size);
            } else {
                // Literal without indexing (0000) or never indexed (0001).
                let never_indexed = first & 0x10 != 0;
                let (name, value) = self.literal(&mut src, 4)?;
                block.fields.push(Field {
                    name,
                    value,
                    never_indexed,
                });
            }
        }
        Ok(block)
    }

    /// A literal field's name (an index with this prefix, or a string) and value.
    fn literal(&self, src: &mut &[u8], prefix: u8) -> Result<(Bytes, Bytes), BadBlock> {
        let index = integer(src, prefix)?;
        let name = if index == 0 {
            string(src)?
        } else {
            self.get(index)?.0
        };
        Ok((name, string(src)?))
    }

    fn get(&self, index: usize) -> Result<(Bytes, Bytes), BadBlock> {
        match index {
            0 => Err(BadBlock("index 0")),
            i if i <= STATIC.len() => {
                let (n, v) = STATIC[i - 1];
                Ok((Bytes::from_static(n), Bytes::from_static(v)))
            }
            i => self
                .entries
                .get(i - STATIC.len() - 1)
                .cloned()
                .ok_or(BadBlock("index past the table")),
        }
    }

    fn insert(&mut self, name: Bytes, value: Bytes) {
        let size = name.len() + value.len() + 32;
        self.evict(size);
        // An entry larger than the table empties it and is not kept (RFC 7541, 4.4).
        if size <= self.max {
            self.size += size;
            self.entries.push_front((name, value));
        }
    }

    /// Evict the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.entries.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + 32,
                None => break,
            }
        }
    }
}

/// An integer with an N-bit prefix (RFC 7541, 5.1), bounded well below overflow.
fn integer(src: &mut &[u8], prefix: u8) -> Result<usize, BadBlock> {
    let (&first, rest) = src.split_first().ok_or(BadBlock("truncated integer"))?;
    *src = rest;
    let mask = (1usize << prefix) - 1;
    let mut value = usize::from(first) & mask;
    if value < mask {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let (&b, rest) = src.split_first().ok_or(BadBlock("truncated integer"))?;
        *src = rest;
        // Four continuation bytes reach 2^28: more than any length or index can be.
        if shift > 21 {
            return Err(BadBlock("integer too large"));
        }
        value += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// A string literal (RFC 7541, 5.2), Huffman-decoded when so marked.
fn string(src: &mut &[u8]) -> Result<Bytes, BadBlock> {
    let huffman = src.first().is_some_and(|b| b & 0x80 != 0);
    let len = integer(src, 7)?;
    if len > src.len() {
        return Err(BadBlock("truncated string"));
    }
    let (raw, rest) = src.split_at(len);
    *src = rest;
    if huffman {
        let mut out = Vec::with_capacity(len * 8 / 5);
        huffman::decode(raw, &mut out).map_err(|_| BadBlock("bad Huffman code"))?;
        Ok(Bytes::from(out))
    } else {
        Ok(Bytes::copy_from_slice(raw))
    }
}

/// Write `fields` as literals without indexing (never indexed where they were), names and
/// values as plain strings, after the size updates: a block the server decodes the same
/// whatever its dynamic table holds, and that changes nothing in it but the size updates.
pub(super) fn encode(size_updates: &[usize], fields: &[Field], out: &mut Vec<u8>) {
    for &size in size_updates {
        put_integer(out, 0x20, 5, size);
    }
    for f in fields {
        out.push(if f.never_indexed { 0x10 } else { 0x00 });
        for s in [&f.name, &f.value] {
            put_integer(out, 0x00, 7, s.len());
            out.extend_from_slice(s);
        }
    }
}

fn put_integer(out: &mut Vec<u8>, flags: u8, prefix: u8, value: usize) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// The static table (RFC 7541, Appendix A).
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

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

    fn fields(block: &Block) -> Vec<(String, String)> {
        block
            .fields
            .iter()
            .map(|f| {
                (
                    String::from_utf8_lossy(&f.name).into_owned(),
                    String::from_utf8_lossy(&f.value).into_owned(),
                )
            })
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// RFC 7541, C.4: three requests on one connection, Huffman-coded, with the dynamic
    /// table carrying fields from one request to the next.
    #[test]
    fn decodes_the_rfc_request_sequence_with_huffman() {
        let mut d = Decoder::default();
        let one = d
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .unwrap();
        assert_eq!(
            fields(&one),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ])
        );
        assert_eq!(d.size, 57);
        let two = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        assert_eq!(
            fields(&two),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache")
            ])
        );
        assert_eq!(d.size, 110);
        let three = d
            .decode(&hex(
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ))
            .unwrap();
        assert_eq!(
            fields(&three),
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value")
            ])
        );
        assert_eq!(d.size, 164);
    }

    /// RFC 7541, C.5 (responses, a 256-byte table): evictions keep indices as the encoder's.
    #[test]
    fn evicts_as_the_encoder_does() {
        let mut d = Decoder::default();
        d.decode(&hex("3fe1 01")).unwrap(); // size update to 256
        assert_eq!(d.max, 256);
        d.decode(&hex(
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
             6c65 2e63 6f6d",
        ))
        .unwrap();
        assert_eq!(d.size, 222);
        let two = d.decode(&hex("4803 3330 37c1 c0bf")).unwrap();
        assert_eq!(
            fields(&two)[0],
            (":status".to_string(), "307".to_string()),
            "{two:?}"
        );
        assert_eq!(fields(&two)[3].1, "https://www.example.com");
        assert_eq!(d.size, 222);
        assert_eq!(d.entries.len(), 4);
    }

    #[test]
    fn encoded_literals_decode_to_the_same_fields_and_leave_the_table_alone() {
        let fields = vec![
            Field {
                name: Bytes::from_static(b":authority"),
                value: Bytes::from(vec![b'x'; 300]),
                never_indexed: false,
            },
            Field {
                name: Bytes::from_static(b"authorization"),
                value: Bytes::from_static(b"secret"),
                never_indexed: true,
            },
        ];
        let mut out = Vec::new();
        encode(&[128], &fields, &mut out);
        let mut d = Decoder::default();
        let block = d.decode(&out).unwrap();
        assert_eq!(block.fields, fields);
        assert_eq!(block.size_updates, [128]);
        assert_eq!((d.size, d.max), (0, 128));
    }

    #[test]
    fn refuses_what_h2_refuses() {
        let mut d = Decoder::default();
        assert!(d.decode(&hex("80")).is_err(), "index 0");
        assert!(d.decode(&hex("be")).is_err(), "empty dynamic table");
        assert!(d.decode(&hex("3fe2 1f")).is_err(), "size over 4096");
        assert!(
            d.decode(&hex("82 20")).is_err(),
            "size update after a field"
        );
        assert!(d.decode(&hex("ff ff ff ff ff 0f")).is_err(), "huge index");
        assert!(d.decode(&hex("41 05 61")).is_err(), "truncated string");
        assert!(d.decode(&hex("41 81 00")).is_err(), "bad Huffman");
    }
}
