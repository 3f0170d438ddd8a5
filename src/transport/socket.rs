//! What a listener accepts on: a TCP socket or a unix domain socket (`unix.rs`), and the
//! connection an accept yields. Everything after the accept (TLS, deadlines, HTTP, drain)
//! is the same for both.

use std::io;

use tokio::net::{TcpListener, TcpStream, UnixStream};

use super::unix::UnixListener;

/// A listening socket.
pub enum Socket {
    Tcp(TcpListener),
    /// Its file is removed when the listener closes.
    Unix(UnixListener),
}

impl From<TcpListener> for Socket {
    fn from(l: TcpListener) -> Socket {
        Socket::Tcp(l)
    }
}

impl From<UnixListener> for Socket {
    fn from(l: UnixListener) -> Socket {
        Socket::Unix(l)
    }
}

impl Socket {
    /// The TCP address (a unix socket has none).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Socket::Tcp(l) => l.local_addr(),
            Socket::Unix(l) => Err(io::Error::other(format!(
                "unix:{} has no TCP address",
                l.path().display()
            ))),
        }
    }

    /// The address, as logs show it: `host:port`, or `unix:PATH`.
    pub fn shown(&self) -> io::Result<String> {
        match self {
            Socket::Tcp(l) => Ok(l.local_addr()?.to_string()),
            Socket::Unix(l) => Ok(format!("unix:{}", l.path().display())),
        }
    }

    pub(super) async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Socket::Tcp(l) => {
                let (tcp, _peer) = l.accept().await?;
                // Without TCP_NODELAY small responses wait for the peer's delayed ACK.
                let _ = tcp.set_nodelay(true);
                Ok(Accepted::Tcp(tcp))
            }
            Socket::Unix(l) => l.accept().await.map(Accepted::Unix),
        }
    }
}

/// An accepted connection, before TLS.
pub(super) enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
}
