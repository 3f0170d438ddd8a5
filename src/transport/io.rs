//! A connection's byte stream as hyper gets it: plain or TLS, over TCP or a unix socket
//! ([`Stream`]), behind
//! [`Prefixed`], which first replays bytes already read from it (the HTTP/2 preface, read
//! under the connection's handshake deadline before hyper takes over), then reads on.
//! Writes, vectored writes included, go straight through both.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::server::TlsStream;

/// Plain or TLS (boxed: a TLS session is large, and most listeners are plain), over TCP or
/// a unix socket (`--grpc-uds`). One variant per combination, so a TCP connection's reads
/// and writes take one branch, as they did before unix sockets.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Unix(UnixStream),
    UnixTls(Box<TlsStream<UnixStream>>),
}

/// `$body` with `$s` the pinned stream inside, whichever it is (one branch per call).
macro_rules! pinned {
    ($stream:expr, $s:ident => $body:expr) => {
        match $stream.get_mut() {
            Stream::Plain(s) => {
                let $s = Pin::new(s);
                $body
            }
            Stream::Tls(s) => {
                let $s = Pin::new(s.as_mut());
                $body
            }
            Stream::Unix(s) => {
                let $s = Pin::new(s);
                $body
            }
            Stream::UnixTls(s) => {
                let $s = Pin::new(s.as_mut());
                $body
            }
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        pinned!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        pinned!(self, s => s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        pinned!(self, s => s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
            Stream::Unix(s) => s.is_write_vectored(),
            Stream::UnixTls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        pinned!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        pinned!(self, s => s.poll_shutdown(cx))
    }
}

/// `AsyncWrite` for a wrapper that changes only what is read (its field `inner` is the
/// stream): every write, vectored or not, goes straight through. Where it is used,
/// `AsyncWrite`, `Pin`, `Context` and `Poll` are in scope.
macro_rules! write_through {
    ($wrapper:ident) => {
        impl<T: AsyncWrite + Unpin> AsyncWrite for $wrapper<T> {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn poll_shutdown(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
            }
        }
    };
}
pub(super) use write_through;

pub(super) struct Prefixed<T> {
    prefix: Vec<u8>,
    /// Bytes of `prefix` already replayed.
    pos: usize,
    inner: T,
}

impl<T> Prefixed<T> {
    pub(super) fn new(prefix: Vec<u8>, inner: T) -> Self {
        Prefixed {
            prefix,
            pos: 0,
            inner,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.pos < this.prefix.len() {
            let rest = &this.prefix[this.pos..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.pos += n;
            if this.pos == this.prefix.len() {
                this.prefix = Vec::new();
                this.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

write_through!(Prefixed);

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn replays_the_prefix_then_reads_on_and_writes_through() {
        let (a, mut b) = tokio::io::duplex(64);
        b.write_all(b"world").await.unwrap();
        let mut p = Prefixed::new(b"hello ".to_vec(), a);
        let mut got = vec![0u8; 11];
        p.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"hello world");
        p.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        b.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
    }

    #[tokio::test]
    async fn a_small_buffer_takes_the_prefix_in_pieces() {
        let (a, _b) = tokio::io::duplex(64);
        let mut p = Prefixed::new(b"abcdef".to_vec(), a);
        let mut two = [0u8; 2];
        for want in [b"ab", b"cd", b"ef"] {
            let n = p.read(&mut two).await.unwrap();
            assert_eq!(&two[..n], want);
        }
    }
}
