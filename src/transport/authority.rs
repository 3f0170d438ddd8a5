//! Any `:authority` a gRPC client sends is served: the HTTP/2 byte stream from the client,
//! after its preface, with the header blocks whose `:authority` the HTTP/2 server (h2) would
//! refuse rewritten without it.
//!
//! Why: gRPC C-core (Envoy's `google_grpc`, grpcio, grpc-java on a socket) sends the socket
//! path of a `unix:` target as `:authority` (`/tmp/rls.sock`, or percent-encoded
//! `tmp%2Frls.sock`), and some clients send an empty one. h2 parses `:authority` as a URI
//! authority and answers such a stream with `RST_STREAM(PROTOCOL_ERROR)`, with no way to
//! relax it; the reference (grpc-go) serves them, and nothing here reads the authority.
//!
//! How: HEADERS and CONTINUATION frames are gathered into their block and decoded
//! (`hpack.rs`) with the client's dynamic table; every other frame passes through as it
//! arrives. The first block decides: if h2 accepts its `:authority` (or it has none), it
//! passes unchanged, byte for byte, and so does everything after it, unread — a gRPC client
//! sends its channel's one authority on every call, so the request path pays for one
//! decoded block per connection. From a first block with an authority h2 refuses, the
//! connection is *translated*: that block and every later one go to the server
//! re-encoded as literals that use no table (`hpack::encode`), the refused `:authority`
//! dropped, so what the client's table holds no longer matters to the server. Blocks are
//! bounded ([`MAX_BLOCK`]); a client that exceeds the bound, or sends what does not decode,
//! gets its bytes passed through unread from then on, and h2 judges them as before.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use hyper::http::uri::Authority;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::hpack::{self, Decoder, Field};

/// The largest header block gathered, encoded: past what the server accepts decoded
/// (hyper's header list limit, 16 KiB; a block's encoding is no larger than its fields), so
/// only a client that would be refused anyway reaches it. Bounds what a connection holds.
pub(super) const MAX_BLOCK: usize = 64 * 1024;

/// A frame payload's largest size every HTTP/2 peer accepts (`SETTINGS_MAX_FRAME_SIZE`'s
/// initial value, which the server keeps): a rewritten block is cut into frames of this
/// size, and a header frame larger than this is not gathered (the server refuses it).
const FRAME_MAX: usize = 16_384;

const HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// What the filter does with the bytes it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The first block is being gathered: it decides between `Off` and `Translating`.
    Watching,
    /// Every block is re-encoded (a block was rewritten on this connection).
    Translating,
    /// Everything passes unread (a block this filter could not follow).
    Off,
}

/// A header block being gathered: its HEADERS frame's stream, flags and priority fields,
/// the fragments so far, and the frames as received (sent on when the block passes).
struct Gathering {
    stream: [u8; 4],
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragments: BytesMut,
    raw: BytesMut,
}

/// The client-to-server half of an HTTP/2 connection, filtered (see the module comment);
/// writes go straight through.
pub(super) struct LenientAuthority<T> {
    inner: T,
    mode: Mode,
    decoder: Decoder,
    /// Read from the client, not yet looked at.
    input: BytesMut,
    /// Ready for the server.
    output: BytesMut,
    /// Payload bytes of a passing frame still to come.
    passing: usize,
    block: Option<Gathering>,
    eof: bool,
}

impl<T> LenientAuthority<T> {
    /// Filter `inner`, whose first `preface` bytes (the client's connection preface) pass
    /// before the first frame.
    pub(super) fn new(preface: usize, inner: T) -> Self {
        LenientAuthority {
            inner,
            mode: Mode::Watching,
            decoder: Decoder::default(),
            input: BytesMut::new(),
            output: BytesMut::new(),
            passing: preface,
            block: None,
            eof: false,
        }
    }

    /// Move what can be decided from `input` to `output`.
    fn process(&mut self) {
        loop {
            if self.mode == Mode::Off {
                let rest = self.input.split();
                self.output.extend_from_slice(&rest);
                return;
            }
            if self.passing > 0 {
                let n = self.passing.min(self.input.len());
                if n == 0 {
                    return;
                }
                let part = self.input.split_to(n);
                self.output.extend_from_slice(&part);
                self.passing -= n;
                continue;
            }
            if self.input.len() < HEADER_LEN {
                return;
            }
            let len = u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]]) as usize;
            let kind = self.input[3];
            let flags = self.input[4];
            let gathered = self.block.as_ref().map_or(0, |b| b.raw.len());
            let header_block = kind == HEADERS || kind == CONTINUATION;
            if !header_block {
                if self.block.is_some() {
                    // Only CONTINUATION may follow an unfinished block: h2 will refuse this.
                    self.give_up();
                    continue;
                }
                let head = self.input.split_to(HEADER_LEN);
                self.output.extend_from_slice(&head);
                self.passing = len;
                continue;
            }
            if len > FRAME_MAX
                || gathered + HEADER_LEN + len > MAX_BLOCK
                || (kind == HEADERS) == self.block.is_some()
            {
                // Too large, a CONTINUATION with no block open, or a HEADERS inside one.
                self.give_up();
                continue;
            }
            if self.input.len() < HEADER_LEN + len {
                self.input.reserve(HEADER_LEN + len - self.input.len());
                return;
            }
            let frame = self.input.split_to(HEADER_LEN + len);
            if let Err(()) = self.gather(kind, flags, frame) {
                self.give_up();
                continue;
            }
            if flags & END_HEADERS != 0
                && let Some(block) = self.block.take()
                && let Err(raw) = self.finish(block)
            {
                self.output.extend_from_slice(&raw);
                self.mode = Mode::Off;
            }
        }
    }

    /// Add one HEADERS or CONTINUATION frame to the block.
    fn gather(&mut self, kind: u8, flags: u8, frame: BytesMut) -> Result<(), ()> {
        let payload = &frame[HEADER_LEN..];
        if kind == CONTINUATION {
            let block = self.block.as_mut().ok_or(())?;
            if frame[5..9] != block.stream {
                return Err(());
            }
            block.fragments.extend_from_slice(payload);
            block.raw.extend_from_slice(&frame);
            return Ok(());
        }
        let mut body = payload;
        let mut pad = 0;
        if flags & PADDED != 0 {
            let (&p, rest) = body.split_first().ok_or(())?;
            pad = usize::from(p);
            body = rest;
        }
        let priority = if flags & PRIORITY != 0 {
            let fields: [u8; 5] = body.get(..5).ok_or(())?.try_into().map_err(|_| ())?;
            body = &body[5..];
            Some(fields)
        } else {
            None
        };
        let fragment = body
            .get(..body.len().checked_sub(pad).ok_or(())?)
            .ok_or(())?;
        let mut stream = [0; 4];
        stream.copy_from_slice(&frame[5..9]);
        self.block = Some(Gathering {
            stream,
            end_stream: flags & END_STREAM != 0,
            priority,
            fragments: BytesMut::from(fragment),
            raw: frame,
        });
        Ok(())
    }

    /// A whole block: decode it, then send it on as it came or rewritten. When it does
    /// not decode, its frames come back to be sent on as they are.
    fn finish(&mut self, block: Gathering) -> Result<(), BytesMut> {
        let Ok(decoded) = self.decoder.decode(&block.fragments) else {
            return Err(block.raw);
        };
        let refused =
            |f: &Field| f.name == ":authority" && Authority::try_from(&f.value[..]).is_err();
        if self.mode == Mode::Watching && !decoded.fields.iter().any(refused) {
            // A client sends the authority of its channel, the same on every call: one it
            // accepts on the first request needs no watching after it, so the connection's
            // later bytes pass unread and a well-behaved client pays for one decoded block.
            self.output.extend_from_slice(&block.raw);
            self.mode = Mode::Off;
            return Ok(());
        }
        if self.mode == Mode::Watching {
            tracing::debug!(
                "a client sent an :authority the HTTP/2 server refuses; rewriting its header blocks"
            );
        }
        self.mode = Mode::Translating;
        let fields: Vec<Field> = decoded.fields.into_iter().filter(|f| !refused(f)).collect();
        let mut encoded = Vec::new();
        hpack::encode(&decoded.size_updates, &fields, &mut encoded);
        self.write_block(&block, &encoded);
        Ok(())
    }

    /// `encoded` as a HEADERS frame (with the original's END_STREAM and priority) and as
    /// many CONTINUATIONs as it needs.
    fn write_block(&mut self, block: &Gathering, encoded: &[u8]) {
        let priority: &[u8] = block.priority.as_ref().map_or(&[], |p| &p[..]);
        let first = encoded.len().min(FRAME_MAX - priority.len());
        let (head, mut rest) = encoded.split_at(first);
        let mut flags = if block.end_stream { END_STREAM } else { 0 };
        if block.priority.is_some() {
            flags |= PRIORITY;
        }
        if rest.is_empty() {
            flags |= END_HEADERS;
        }
        self.put_frame(HEADERS, flags, block.stream, &[priority, head]);
        while !rest.is_empty() {
            let n = rest.len().min(FRAME_MAX);
            let (part, more) = rest.split_at(n);
            rest = more;
            let flags = if rest.is_empty() { END_HEADERS } else { 0 };
            self.put_frame(CONTINUATION, flags, block.stream, &[part]);
        }
    }

    fn put_frame(&mut self, kind: u8, flags: u8, stream: [u8; 4], parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len = (len as u32).to_be_bytes();
        self.output
            .extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
        self.output.extend_from_slice(&stream);
        for p in parts {
            self.output.extend_from_slice(p);
        }
    }

    /// From here on, pass everything through unread: what was gathered first.
    fn give_up(&mut self) {
        tracing::debug!("HTTP/2 header blocks not followed on this connection");
        if let Some(block) = self.block.take() {
            self.output.extend_from_slice(&block.raw);
        }
        self.mode = Mode::Off;
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for LenientAuthority<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output.split_to(n));
                return Poll::Ready(Ok(()));
            }
            if this.eof || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if this.mode == Mode::Off && this.input.is_empty() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            // Read into the caller's buffer (no buffer of our own per connection), take
            // what came, and give the buffer back as it was.
            let before = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let got = &buf.filled()[before..];
                    if got.is_empty() {
                        // The client closed: what is left goes on as it is, then EOF.
                        this.eof = true;
                        if let Some(block) = this.block.take() {
                            this.output.extend_from_slice(&block.raw);
                        }
                        let rest = this.input.split();
                        this.output.extend_from_slice(&rest);
                        continue;
                    }
                    this.input.extend_from_slice(got);
                    buf.set_filled(before);
                    this.process();
                }
            }
        }
    }
}

super::io::write_through!(LenientAuthority);

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::transport::hpack::Decoder;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A block: `:method POST` (indexed), `:scheme http` (indexed), `:path` and then
    /// `:authority` as literals with incremental indexing (plain strings).
    fn request_block(authority: &[u8]) -> Vec<u8> {
        let mut b = vec![0x83, 0x86, 0x44, 5];
        b.extend_from_slice(b"/a/b1");
        b.push(0x41);
        b.push(authority.len() as u8);
        b.extend_from_slice(authority);
        b
    }

    /// What the filter makes of `input`, read `chunk` bytes at a time.
    async fn filtered(input: &[u8], chunk: usize) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        client.write_all(input).await.unwrap();
        drop(client);
        let mut f = LenientAuthority::new(3, server);
        let mut out = Vec::new();
        let mut buf = vec![0; chunk];
        loop {
            let n = f.read(&mut buf).await.unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// The frames of `bytes` after the 3-byte preface: (type, flags, stream, payload).
    fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        assert_eq!(&bytes[..3], b"PRI");
        let mut rest = &bytes[3..];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            let stream = u32::from_be_bytes(rest[5..9].try_into().unwrap());
            out.push((rest[3], rest[4], stream, rest[9..9 + len].to_vec()));
            rest = &rest[9 + len..];
        }
        out
    }

    fn names_and_values(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        decoder
            .decode(block)
            .unwrap()
            .fields
            .iter()
            .map(|f| {
                (
                    String::from_utf8_lossy(&f.name).into(),
                    String::from_utf8_lossy(&f.value).into(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_connection_with_valid_authorities_passes_byte_for_byte() {
        let mut input = b"PRI".to_vec();
        input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        input.extend(frame(HEADERS, END_HEADERS, 1, &request_block(b"rls")));
        input.extend(frame(0x0, END_STREAM, 1, &[0; 40_000]));
        // A block in two frames, padded, with priority fields; the second request refers
        // to the first one's entries.
        let mut padded = vec![4, 0, 0, 0, 0, 16];
        padded.extend_from_slice(&[0x83, 0x86]);
        padded.extend_from_slice(&[0; 4]);
        input.extend(frame(HEADERS, PADDED | PRIORITY, 3, &padded));
        input.extend(frame(CONTINUATION, END_HEADERS, 3, &[0xbf, 0xbe]));
        for chunk in [1, 7, 100, 1 << 16] {
            assert_eq!(
                filtered(&input, chunk).await,
                input,
                "read {chunk} at a time"
            );
        }
    }

    #[tokio::test]
    async fn a_refused_authority_is_dropped_and_later_blocks_need_no_table() {
        let mut input = b"PRI".to_vec();
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &request_block(b"/tmp/rls.sock"),
        ));
        input.extend(frame(0x0, END_STREAM, 1, b"body"));
        // The next request refers to the first one's entries: the path, then the
        // refused authority (dynamic indices 63 and 62), and keeps its priority fields.
        let mut second = vec![0, 0, 0, 1, 200];
        second.extend_from_slice(&[0x83, 0x86, 0xbf, 0xbe]);
        input.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM | PRIORITY,
            3,
            &second,
        ));
        for chunk in [1, 5, 1 << 16] {
            let out = filtered(&input, chunk).await;
            let f = frames(&out);
            assert_eq!(f.len(), 3, "{f:?}");
            // A decoder that starts empty, as the server's table does not matter any more.
            let mut server = Decoder::default();
            let want = vec![
                (":method".to_string(), "POST".to_string()),
                (":scheme".into(), "http".into()),
                (":path".into(), "/a/b1".into()),
            ];
            assert_eq!((f[0].0, f[0].1, f[0].2), (HEADERS, END_HEADERS, 1));
            assert_eq!(names_and_values(&mut server, &f[0].3), want);
            assert_eq!(f[1], (0x0, END_STREAM, 1, b"body".to_vec()));
            assert_eq!(
                (f[2].0, f[2].1, f[2].2),
                (HEADERS, END_HEADERS | END_STREAM | PRIORITY, 3)
            );
            assert_eq!(&f[2].3[..5], &[0, 0, 0, 1, 200]);
            assert_eq!(names_and_values(&mut server, &f[2].3[5..]), want);
        }
    }

    #[tokio::test]
    async fn an_empty_authority_is_dropped_and_valid_ones_kept_once_translating() {
        let mut input = b"PRI".to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &request_block(b"")));
        input.extend(frame(HEADERS, END_HEADERS, 3, &request_block(b"rls:8081")));
        let f = frames(&filtered(&input, 1 << 16).await);
        let mut server = Decoder::default();
        assert!(
            !names_and_values(&mut server, &f[0].3)
                .iter()
                .any(|(n, _)| n == ":authority")
        );
        assert!(
            names_and_values(&mut server, &f[1].3)
                .contains(&(":authority".to_string(), "rls:8081".to_string()))
        );
    }

    #[tokio::test]
    async fn a_first_accepted_authority_leaves_the_connection_unread() {
        // The first block decides: a later refused authority on the same connection goes to
        // the server as sent (h2 refuses that one stream, as it would without the filter).
        let mut input = b"PRI".to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &request_block(b"rls")));
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            3,
            &request_block(b"/tmp/rls.sock"),
        ));
        assert_eq!(filtered(&input, 1 << 16).await, input);
    }

    #[tokio::test]
    async fn a_large_rewritten_block_is_cut_into_continuations() {
        let mut block = request_block(b"/tmp/rls.sock");
        for i in 0..40u8 {
            // Literal without indexing, new name, 1000-byte value.
            block.extend_from_slice(&[0x00, 0x02, b'x', b'a' + (i % 26), 0x7f, 0xe9, 0x06]);
            block.extend(std::iter::repeat_n(b'v', 1000));
        }
        let mut input = b"PRI".to_vec();
        let parts: Vec<&[u8]> = block.chunks(16_000).collect();
        for (i, part) in parts.iter().enumerate() {
            let kind = if i == 0 { HEADERS } else { CONTINUATION };
            let flags = if i + 1 == parts.len() { END_HEADERS } else { 0 };
            input.extend(frame(kind, flags, 1, part));
        }
        let f = frames(&filtered(&input, 1 << 16).await);
        assert!(f.len() >= 3, "{}", f.len());
        assert!(f.iter().all(|(_, _, _, p)| p.len() <= FRAME_MAX));
        assert_eq!(f[0].0, HEADERS);
        assert!(f[1..].iter().all(|(k, _, _, _)| *k == CONTINUATION));
        assert_eq!(f.last().unwrap().1, END_HEADERS);
        let joined: Vec<u8> = f.iter().flat_map(|(_, _, _, p)| p.clone()).collect();
        let fields = names_and_values(&mut Decoder::default(), &joined);
        assert_eq!(fields.len(), 3 + 40);
        assert!(fields.iter().all(|(n, _)| n != ":authority"));
    }

    #[tokio::test]
    async fn what_does_not_decode_or_is_too_large_passes_unread() {
        // A HEADERS that does not decode (index 0), then a refused authority: both as sent.
        let mut input = b"PRI".to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &[0x80]));
        input.extend(frame(HEADERS, END_HEADERS, 3, &request_block(b"/x")));
        assert_eq!(filtered(&input, 1 << 16).await, input);
        // A block past the bound, then a refused authority: both as sent.
        let mut input = b"PRI".to_vec();
        input.extend(frame(HEADERS, 0, 1, &[0; 16_000]));
        for _ in 0..(MAX_BLOCK / 16_000) {
            input.extend(frame(CONTINUATION, 0, 1, &[0; 16_000]));
        }
        input.extend(frame(HEADERS, END_HEADERS, 3, &request_block(b"/x")));
        assert_eq!(filtered(&input, 1 << 16).await, input);
        // A header frame larger than the server's frame size.
        let mut input = b"PRI".to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &[0x82; FRAME_MAX + 1]));
        input.extend(frame(HEADERS, END_HEADERS, 3, &request_block(b"/x")));
        assert_eq!(filtered(&input, 1 << 16).await, input);
        // A DATA frame inside an unfinished block.
        let mut input = b"PRI".to_vec();
        input.extend(frame(HEADERS, 0, 1, &request_block(b"/x")));
        input.extend(frame(0x0, 0, 1, b"x"));
        assert_eq!(filtered(&input, 1 << 16).await, input);
    }
}
