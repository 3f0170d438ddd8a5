//! A TCP proxy that delays what the server sends back: a slow store that still answers (every
//! reply arrives, `delay` late), as a busy or distant Redis looks to a client. Replies are
//! held for `delay` from when they arrived, not one after another, so the proxy adds latency
//! but takes nothing away from throughput. The delay can change while connections are open.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub struct DelayProxy {
    pub port: u16,
    delay_us: Arc<AtomicU64>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Proxy `127.0.0.1:<port>` to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let delay_us = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (d, a) = (delay_us.clone(), accepted.clone());
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::Relaxed);
                let Ok(up) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(pipe(down, up, d.clone()));
            }
        });
        DelayProxy {
            port,
            delay_us,
            accepted,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// From now on, hold every reply this long.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    /// Connections accepted so far (a client that reconnects opens a new one).
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(down: TcpStream, up: TcpStream, delay_us: Arc<AtomicU64>) {
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (mut down_r, mut down_w) = down.into_split();
    let (mut up_r, mut up_w) = up.into_split();
    // Requests go straight through.
    let requests = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut down_r, &mut up_w).await;
        let _ = up_w.shutdown().await;
    });
    // Replies are stamped on arrival and written `delay` later, in order.
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match up_r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let due =
                        Instant::now() + Duration::from_micros(delay_us.load(Ordering::Relaxed));
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    while let Some((due, bytes)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if down_w.write_all(&bytes).await.is_err() {
            break;
        }
    }
    reader.abort();
    requests.abort();
}
