//! A unix domain socket to listen on, and its file: bound at startup (a stale socket left
//! by a process that died without cleaning up is replaced; a live one, or any other file,
//! is an error), given the permissions asked for, listened on when serving starts, and
//! removed when the listener closes.
//!
//! The file is removed only if it is still the one this process bound (same device and
//! inode): a second instance that replaced it keeps its own.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Pending connections, as the TCP listeners.
const BACKLOG: u32 = 1024;

/// A unix socket bound to its path that does not listen yet: connections are refused until
/// [`UnixBound::listen`].
pub struct UnixBound {
    socket: tokio::net::UnixSocket,
    file: SocketFile,
}

impl UnixBound {
    /// Bind `path`, replacing a stale socket there; `mode` (permission bits) is applied to
    /// the file, else the process's umask decides.
    pub fn bind(path: &Path, mode: Option<u32>) -> io::Result<UnixBound> {
        let fail = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on unix:{}: {e}", path.display()),
            )
        };
        remove_stale(path).map_err(fail)?;
        let socket = tokio::net::UnixSocket::new_stream().map_err(fail)?;
        socket.bind(path).map_err(fail)?;
        // From here on the file is ours: dropping `file` removes it, on every error too.
        let file = SocketFile::of(path).map_err(fail)?;
        if let Some(mode) = mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(fail)?;
        }
        Ok(UnixBound { socket, file })
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Start listening: from now on connections are accepted.
    pub fn listen(self) -> io::Result<UnixListener> {
        let path = self.file.path.clone();
        let listener = self.socket.listen(BACKLOG).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on unix:{}: {e}", path.display()),
            )
        })?;
        Ok(UnixListener {
            listener,
            _file: self.file,
        })
    }
}

/// A listening unix socket; its file goes when it is dropped.
pub struct UnixListener {
    listener: tokio::net::UnixListener,
    _file: SocketFile,
}

impl UnixListener {
    pub(super) async fn accept(&self) -> io::Result<tokio::net::UnixStream> {
        self.listener.accept().await.map(|(s, _)| s)
    }

    pub fn path(&self) -> &Path {
        &self._file.path
    }
}

/// A socket file this process created, removed on drop if it is still that file.
struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketFile {
    fn of(path: &Path) -> io::Result<SocketFile> {
        let m = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
        if ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the gRPC unix socket");
        }
    }
}

/// Make room at `path`: nothing there is fine; a socket nobody listens on (a process that
/// was killed) is removed; a socket in use or any other kind of file is an error.
fn remove_stale(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket",
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another process is listening on it",
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "removing a stale gRPC unix socket");
            std::fs::remove_file(path)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn binds_with_its_mode_listens_and_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sock");
        let bound = UnixBound::bind(&path, Some(0o660)).unwrap();
        assert_eq!(mode(&path), 0o660);
        // Bound but not listening: refused, as the TCP sockets before serving starts.
        assert!(std::os::unix::net::UnixStream::connect(&path).is_err());
        let listener = bound.listen().unwrap();
        let client = tokio::net::UnixStream::connect(&path);
        let (accepted, connected) = tokio::join!(listener.accept(), client);
        accepted.unwrap();
        connected.unwrap();
        drop(listener);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_a_live_one_or_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sock");
        // A socket file nobody listens on: what a killed process leaves.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let live = UnixBound::bind(&path, None).unwrap().listen().unwrap();
        let e = UnixBound::bind(&path, None).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(
            e.to_string().contains("another process is listening"),
            "{e}"
        );
        drop(live);
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let e = UnixBound::bind(&file, None).err().unwrap();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert!(file.exists());
    }

    #[test]
    fn a_replaced_file_is_left_to_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sock");
        let bound = UnixBound::bind(&path, None).unwrap();
        // Another instance took the path over.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "theirs").unwrap();
        drop(bound);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "theirs");
    }
}
