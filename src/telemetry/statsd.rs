//! The statsd/DogStatsD sink: a background thread that, every flush interval, sends the
//! counters that moved as deltas (their gostats flush) and the response times recorded since
//! (their per-call `response_time` timer, folded into one line per distinct millisecond with
//! a sample rate), then flushes the buffered lines.
//!
//! Nothing here runs on the request path: requests only bump the Prometheus atomics (see
//! `metrics::statsd`). Sends are buffered (UDP datagrams of at most 1432 bytes like gostats,
//! or a buffered TCP stream) and bounded in time (TCP connect and write time out), and a
//! failure drops that flush's lines and reconnects next time — it never blocks a request or
//! grows a queue.
//!
//! Line formats: statsd puts tags in the name as gostats does (`name.__k=v:3|c`);
//! DogStatsD sends them as tags (`name:3|c|#k:v`), as their godogstats sink does.

use std::io::{self, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use cadence::prelude::*;
use cadence::{BufferedUdpMetricSink, MetricSink, StatsdClient};
// std's Mutex: cadence requires sinks to be RefUnwindSafe.
use std::sync::Mutex;

use regex::Regex;

use crate::metrics::Metrics;
use crate::metrics::statsd::RESPONSE_TIME;
use crate::settings::{StatsdProtocol, StatsdSettings};

/// gostats' UDP buffer: one datagram stays below a 1500-byte MTU.
const UDP_DATAGRAM: usize = 1432;
/// gostats' TCP timeouts.
const TCP_DIAL_TIMEOUT: Duration = Duration::from_millis(1500);
const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// The running sink; [`Statsd::stop`] sends a last flush.
pub struct Statsd {
    stop: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Statsd {
    pub fn start(settings: StatsdSettings, metrics: Arc<Metrics>) -> io::Result<Statsd> {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sluice-statsd".into())
            .spawn(move || Flusher::new(settings, metrics).run(&stopped))?;
        Ok(Statsd {
            stop,
            thread: Some(thread),
        })
    }

    /// Flush what is left and stop (the last interval's counts are not lost on shutdown).
    pub fn stop(mut self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A compiled mogrifier: pattern, name template, tag templates.
type Mogrify = (Regex, String, Vec<(String, String)>);

struct Flusher {
    settings: StatsdSettings,
    metrics: Arc<Metrics>,
    client: Option<StatsdClient>,
    /// `.__k=v` suffix for statsd names (empty for DogStatsD, which sends real tags).
    suffix: String,
    /// Last error reported, so a down collector logs once, not every interval.
    failing: bool,
    /// DogStatsD mogrifiers (pattern, name template, tag templates), first match wins.
    mogrifiers: Vec<Mogrify>,
}

impl Flusher {
    fn new(settings: StatsdSettings, metrics: Arc<Metrics>) -> Flusher {
        let suffix = if settings.dogstatsd {
            String::new()
        } else {
            settings
                .tags
                .iter()
                .map(|(k, v)| format!(".__{k}={v}"))
                .collect()
        };
        // Patterns were compiled once already when the settings were read.
        let mogrifiers = settings
            .mogrifiers
            .iter()
            .filter_map(|m| Some((Regex::new(&m.pattern).ok()?, m.name.clone(), m.tags.clone())))
            .collect();
        Flusher {
            settings,
            metrics,
            client: None,
            suffix,
            failing: false,
            mogrifiers,
        }
    }

    /// Their godogstats mogrify: the first pattern that matches renames the stat and adds
    /// its tags (after `EXTRA_TAGS`); `$n` is the n-th capture.
    fn mogrify(&self, name: &str) -> (String, Vec<(String, String)>) {
        for (re, rename, tags) in &self.mogrifiers {
            if let Some(c) = re.captures(name) {
                let fill = |t: &str| dollar_digits(t, |i| c.get(i).map_or("", |m| m.as_str()));
                let tags = tags.iter().map(|(k, v)| (k.clone(), fill(v))).collect();
                return (fill(rename), tags);
            }
        }
        (name.to_string(), Vec::new())
    }

    fn run(mut self, stopped: &mpsc::Receiver<()>) {
        tracing::info!(
            addr = %self.settings.addr,
            protocol = ?self.settings.protocol,
            dogstatsd = self.settings.dogstatsd,
            interval = ?self.settings.flush_interval,
            "statsd sink started"
        );
        loop {
            let last = match stopped.recv_timeout(self.settings.flush_interval) {
                Err(RecvTimeoutError::Timeout) => false,
                Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            };
            self.flush();
            if last {
                break;
            }
        }
    }

    fn connect(&self) -> io::Result<StatsdClient> {
        let addr = self
            .settings
            .addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other("no address"))?;
        let mut builder = match self.settings.protocol {
            StatsdProtocol::Udp => {
                let bind = if addr.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                };
                let socket = UdpSocket::bind(bind)?;
                socket.set_nonblocking(true)?;
                let sink = BufferedUdpMetricSink::with_capacity(addr, socket, UDP_DATAGRAM)
                    .map_err(io::Error::other)?;
                StatsdClient::builder("", sink)
            }
            StatsdProtocol::Tcp => {
                let stream = TcpStream::connect_timeout(&addr, TCP_DIAL_TIMEOUT)?;
                stream.set_write_timeout(Some(TCP_WRITE_TIMEOUT))?;
                stream.set_nodelay(true)?;
                StatsdClient::builder("", TcpSink(Mutex::new(BufWriter::new(stream))))
            }
        };
        if self.settings.dogstatsd {
            for (k, v) in &self.settings.tags {
                builder = builder.with_tag(k.as_str(), v.as_str());
            }
        }
        Ok(builder.build())
    }

    fn flush(&mut self) {
        if self.client.is_none() {
            match self.connect() {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    self.report(&e);
                    return;
                }
            }
        }
        let Some(client) = &self.client else {
            return;
        };
        let mut error = None;
        let named = |base: &str| -> (String, Vec<(String, String)>) {
            if self.mogrifiers.is_empty() {
                (format!("{base}{}", self.suffix), Vec::new())
            } else {
                self.mogrify(base)
            }
        };
        self.metrics.statsd_counters(|stat, delta| {
            let (name, tags) = named(stat);
            let mut line = client.count_with_tags(&name, delta);
            for (k, v) in &tags {
                line = line.with_tag(k, v);
            }
            if let Err(e) = line.try_send() {
                error.get_or_insert(e);
            }
        });
        let (timer, timer_tags) = named(RESPONSE_TIME);
        self.metrics.statsd_timings(|ms, samples| {
            let mut line = client.time_with_tags(&timer, ms);
            for (k, v) in &timer_tags {
                line = line.with_tag(k, v);
            }
            if samples > 1 {
                // One line stands for `samples` calls (statsd's sample rate).
                line = line.with_sampling_rate(1.0 / samples as f64);
            }
            if let Err(e) = line.try_send() {
                error.get_or_insert(e);
            }
        });
        let flushed = client.flush();
        match (error, flushed) {
            (None, Ok(())) => {
                if self.failing {
                    tracing::info!(addr = %self.settings.addr, "statsd sink recovered");
                }
                self.failing = false;
            }
            (Some(e), _) => {
                self.report(&io::Error::other(e.to_string()));
                self.client = None;
            }
            (None, Err(e)) => {
                self.report(&io::Error::other(e.to_string()));
                self.client = None;
            }
        }
    }

    fn report(&mut self, e: &io::Error) {
        if !self.failing {
            tracing::warn!(addr = %self.settings.addr, error = %e, "statsd send failed; retrying every interval");
        }
        self.failing = true;
    }
}

/// Replace `$n` (digits) with `cap(n)`, as their mogrifier templates do.
fn dollar_digits<'a>(template: &str, cap: impl Fn(usize) -> &'a str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let n = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..n].parse::<usize>() {
            Ok(idx) => out.push_str(cap(idx)),
            Err(_) => out.push('$'),
        }
        rest = &after[n..];
    }
    out.push_str(rest);
    out
}

/// Newline-terminated lines over one TCP connection (gostats' default transport).
struct TcpSink(Mutex<BufWriter<TcpStream>>);

impl MetricSink for TcpSink {
    fn emit(&self, metric: &str) -> io::Result<usize> {
        let mut w = self.0.lock().map_err(|_| io::Error::other("poisoned"))?;
        w.write_all(metric.as_bytes())?;
        w.write_all(b"\n")?;
        Ok(metric.len() + 1)
    }

    fn flush(&self) -> io::Result<()> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_digits_like_their_templates() {
        let caps = ["all", "one", "two"];
        let cap = |i: usize| caps.get(i).copied().unwrap_or("");
        assert_eq!(dollar_digits("a.$1.$2.$0.$9", cap), "a.one.two.all.");
        assert_eq!(dollar_digits("cost$", cap), "cost$");
        assert_eq!(dollar_digits("$x", cap), "$x");
    }
}
