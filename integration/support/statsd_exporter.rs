//! The statsd exporter of envoyproxy/ratelimit's integration setup, where their acceptance
//! scenarios read sluice's stats (`envoy::reference_suite`): statsd lines in (UDP and TCP
//! on one port, as prom/statsd-exporter listens on 9125), Prometheus series out on
//! `GET /metrics` (its 9102), named and labelled by a mapping file in statsd_exporter's
//! format (the test's own).
//!
//! A stand-in, not the real exporter: the machines this suite runs on (Debian bookworm) have
//! no `prometheus-statsd-exporter` package, neither PyPI nor npm ships a build of it, and
//! the Go module proxy it would be built from is out of their reach. So this reproduces the
//! part of statsd_exporter that sits between sluice's statsd and what a scenario reads:
//! - glob mappings, first match in file order: `*` stands for one part of the dotted name
//!   (never a dot), `$n` in the name and label values for the n-th `*`;
//!   `match_metric_type` (`counter`, `gauge`, `observer`); `action: drop`;
//! - a name no mapping matches is exported escaped (each character outside
//!   `[a-zA-Z0-9_]` becomes `_`), as statsd_exporter does;
//! - counters (`|c`, a sampled `|@rate` scaled up) add up; gauges (`|g`) are set, or moved
//!   by a signed value; timers and histograms (`|ms`, `|h`, `|d`) keep their sum and count.
//!
//! Not reproduced: regex mappings, buckets and quantiles (an observation is rendered as a
//! histogram with the `+Inf` bucket only), tags, TTLs. A mapping using `match_type: regex`
//! is refused when the file is read, so a mapping file this cannot honour fails the test
//! instead of being half applied. It shares no code with sluice's own reading of mapping
//! files (`src/metrics/mapper/`, for its `/metrics`): here it stands for the third party
//! that receives sluice's statsd, and must not agree with sluice by construction.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::redis::free_port;

/// How often the listener threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// A statsd metric type, as `match_metric_type` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Observer,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        match s {
            "counter" => Some(Kind::Counter),
            "gauge" => Some(Kind::Gauge),
            "observer" | "timer" | "histogram" | "distribution" | "summary" => Some(Kind::Observer),
            _ => None,
        }
    }
}

/// One mapping of the file.
#[derive(Debug)]
struct Mapping {
    /// The glob split on dots; `*` parts capture.
    pattern: Vec<String>,
    name: String,
    labels: BTreeMap<String, String>,
    kind: Option<Kind>,
    drop: bool,
}

impl Mapping {
    /// The captures of `*` when `parts` matches.
    fn matches(&self, parts: &[&str], kind: Kind) -> Option<Vec<String>> {
        if self.kind.is_some_and(|k| k != kind) || parts.len() != self.pattern.len() {
            return None;
        }
        let mut captures = Vec::new();
        for (glob, part) in self.pattern.iter().zip(parts) {
            captures.push(glob_part(glob, part)?);
        }
        Some(captures.into_iter().flatten().collect())
    }
}

/// Match one dotted part against a glob part (literal text and `*`s); the `*`s' texts.
fn glob_part(glob: &str, part: &str) -> Option<Vec<String>> {
    let pieces: Vec<&str> = glob.split('*').collect();
    if pieces.len() == 1 {
        return (glob == part).then(Vec::new);
    }
    let mut rest = part.strip_prefix(pieces[0])?;
    let mut captures = Vec::new();
    for (i, piece) in pieces.iter().enumerate().skip(1) {
        let last = i == pieces.len() - 1;
        let at = if last {
            rest.len()
                .checked_sub(piece.len())
                .filter(|&at| rest[at..] == **piece)?
        } else if piece.is_empty() {
            0
        } else {
            rest.find(piece)?
        };
        captures.push(rest[..at].to_string());
        rest = &rest[at + piece.len()..];
    }
    Some(captures)
}

/// Replace `$n` and `${n}` with the n-th capture (1-based).
fn expand(template: &str, captures: &[String]) -> String {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let braced = chars.peek() == Some(&'{');
        if braced {
            chars.next();
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        if braced {
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) if n >= 1 => out.push_str(captures.get(n - 1).map_or("", String::as_str)),
            _ => out.push('$'),
        }
    }
    out
}

/// statsd_exporter's escape of a name no mapping matched.
fn escape(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// Read a statsd_exporter mapping file (the `mappings:` list).
fn read_mappings(yaml: &str) -> Result<Vec<Mapping>, String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
    let list = doc
        .get("mappings")
        .and_then(|m| m.as_sequence())
        .ok_or("no `mappings` list")?;
    let text = |m: &serde_yaml::Value, k: &str| m.get(k).and_then(|v| v.as_str()).map(String::from);
    list.iter()
        .map(|m| {
            let glob =
                text(m, "match").ok_or_else(|| format!("a mapping without `match`: {m:?}"))?;
            if text(m, "match_type").is_some_and(|t| t != "glob") {
                return Err(format!("`{glob}`: only glob mappings are reproduced"));
            }
            let kind = match text(m, "match_metric_type") {
                Some(k) => Some(Kind::parse(&k).ok_or(format!("`{glob}`: match_metric_type {k}"))?),
                None => None,
            };
            let labels = match m.get("labels").and_then(|l| l.as_mapping()) {
                Some(l) => l
                    .iter()
                    .map(|(k, v)| {
                        let k = k.as_str().ok_or(format!("`{glob}`: label name"))?;
                        let v = v.as_str().ok_or(format!("`{glob}`: label {k}"))?;
                        Ok((k.to_string(), v.to_string()))
                    })
                    .collect::<Result<_, String>>()?,
                None => BTreeMap::new(),
            };
            let drop = text(m, "action").is_some_and(|a| a == "drop");
            Ok(Mapping {
                pattern: glob.split('.').map(String::from).collect(),
                name: text(m, "name").unwrap_or_default(),
                labels,
                kind,
                drop,
            })
        })
        .collect()
}

/// What one series holds.
#[derive(Clone, Copy, Debug)]
enum Sample {
    Counter(f64),
    Gauge(f64),
    Observer { sum: f64, count: f64 },
}

type Series = BTreeMap<(String, BTreeMap<String, String>), Sample>;

struct State {
    mappings: Vec<Mapping>,
    series: Mutex<Series>,
    /// Lines that were not statsd, kept for the failure message.
    bad_lines: Mutex<Vec<String>>,
}

impl State {
    /// One statsd line: `name:value|type[|@rate]…`.
    fn line(&self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let Some(sample) = parse_line(line) else {
            self.bad_lines.lock().unwrap().push(line.to_string());
            return;
        };
        let (stat, kind, value, delta) = sample;
        let parts: Vec<&str> = stat.split('.').collect();
        let (name, labels) = match self
            .mappings
            .iter()
            .find_map(|m| m.matches(&parts, kind).map(|c| (m, c)))
        {
            Some((m, _)) if m.drop => return,
            Some((m, captures)) => (
                expand(&m.name, &captures),
                m.labels
                    .iter()
                    .map(|(k, v)| (k.clone(), expand(v, &captures)))
                    .collect(),
            ),
            None => (escape(stat), BTreeMap::new()),
        };
        let mut series = self.series.lock().unwrap();
        let entry = series.entry((name, labels)).or_insert(match kind {
            Kind::Counter => Sample::Counter(0.0),
            Kind::Gauge => Sample::Gauge(0.0),
            Kind::Observer => Sample::Observer {
                sum: 0.0,
                count: 0.0,
            },
        });
        match entry {
            Sample::Counter(v) => *v += value,
            Sample::Gauge(v) if delta => *v += value,
            Sample::Gauge(v) => *v = value,
            Sample::Observer { sum, count } => {
                *sum += value;
                *count += 1.0;
            }
        }
    }

    fn render(&self) -> String {
        let series = self.series.lock().unwrap();
        let mut out = String::new();
        let mut last_name = None;
        for ((name, labels), sample) in series.iter() {
            if last_name != Some(name) {
                let kind = match sample {
                    Sample::Counter(_) => "counter",
                    Sample::Gauge(_) => "gauge",
                    Sample::Observer { .. } => "histogram",
                };
                out.push_str(&format!(
                    "# HELP {name} Metric autogenerated by statsd_exporter.\n# TYPE {name} {kind}\n"
                ));
                last_name = Some(name);
            }
            let with = |extra: Option<(&str, &str)>| {
                let all: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .chain(extra)
                    .map(|(k, v)| {
                        format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
                    })
                    .collect();
                if all.is_empty() {
                    String::new()
                } else {
                    format!("{{{}}}", all.join(","))
                }
            };
            match sample {
                Sample::Counter(v) | Sample::Gauge(v) => {
                    out.push_str(&format!("{name}{} {v}\n", with(None)));
                }
                Sample::Observer { sum, count } => {
                    out.push_str(&format!(
                        "{name}_bucket{} {count}\n",
                        with(Some(("le", "+Inf")))
                    ));
                    out.push_str(&format!("{name}_sum{} {sum}\n", with(None)));
                    out.push_str(&format!("{name}_count{} {count}\n", with(None)));
                }
            }
        }
        out
    }
}

/// `(name, kind, value, whether a gauge moves rather than is set)`, or `None` for a line
/// that is not statsd.
fn parse_line(line: &str) -> Option<(&str, Kind, f64, bool)> {
    let (name, rest) = line.split_once(':')?;
    let mut fields = rest.split('|');
    let raw = fields.next()?;
    let kind = match fields.next()? {
        "c" => Kind::Counter,
        "g" => Kind::Gauge,
        "ms" | "h" | "d" => Kind::Observer,
        _ => return None,
    };
    let mut value: f64 = raw.parse().ok()?;
    let delta = kind == Kind::Gauge && (raw.starts_with('+') || raw.starts_with('-'));
    if kind == Kind::Counter
        && let Some(rate) = fields.find_map(|f| f.strip_prefix('@'))
    {
        let rate: f64 = rate.parse().ok().filter(|r| *r > 0.0)?;
        value /= rate;
    }
    (!name.is_empty()).then_some((name, kind, value, delta))
}

/// A running exporter; its threads stop when it is dropped.
pub struct StatsdExporter {
    /// Where statsd is received (UDP and TCP).
    pub statsd: SocketAddr,
    /// Where `/metrics` is served.
    pub web: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
}

impl Drop for StatsdExporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl StatsdExporter {
    /// Start on free loopback ports with this mapping file's text.
    pub fn start(mapping_yaml: &str) -> StatsdExporter {
        let mappings = read_mappings(mapping_yaml).unwrap_or_else(|e| panic!("mapping file: {e}"));
        let state = Arc::new(State {
            mappings,
            series: Mutex::new(BTreeMap::new()),
            bad_lines: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        // statsd on one port number for both protocols, as the exporter's `:9125`.
        let (udp, tcp) = (0..20)
            .find_map(|_| {
                let port = free_port();
                let udp = UdpSocket::bind(("127.0.0.1", port)).ok()?;
                let tcp = TcpListener::bind(("127.0.0.1", port)).ok()?;
                Some((udp, tcp))
            })
            .expect("a free port for statsd on UDP and TCP");
        let web = TcpListener::bind(("127.0.0.1", 0)).expect("bind /metrics");
        let exporter = StatsdExporter {
            statsd: udp.local_addr().expect("statsd addr"),
            web: web.local_addr().expect("web addr"),
            state: state.clone(),
            stop: stop.clone(),
        };
        {
            let (state, stop) = (state.clone(), stop.clone());
            udp.set_read_timeout(Some(POLL)).expect("udp timeout");
            thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(n) = udp.recv(&mut buf) {
                        for line in String::from_utf8_lossy(&buf[..n]).lines() {
                            state.line(line);
                        }
                    }
                }
            });
        }
        {
            let (state, stop) = (state.clone(), stop.clone());
            accept_loop(tcp, stop.clone(), move |conn| {
                let (state, stop) = (state.clone(), stop.clone());
                thread::spawn(move || statsd_connection(conn, &state, &stop));
            });
        }
        accept_loop(web, stop, move |conn| serve_metrics(conn, &state));
        exporter
    }

    /// What `GET /metrics` answers now.
    pub fn metrics(&self) -> String {
        self.state.render()
    }

    /// Lines received that were not statsd.
    pub fn bad_lines(&self) -> Vec<String> {
        self.state.bad_lines.lock().unwrap().clone()
    }
}

/// Accept connections on a thread until `stop`, handing each to `each`.
fn accept_loop(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    each: impl Fn(TcpStream) + Send + 'static,
) {
    listener.set_nonblocking(true).expect("nonblocking accept");
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((conn, _)) => {
                    let _ = conn.set_nonblocking(false);
                    each(conn);
                }
                Err(_) => thread::sleep(POLL),
            }
        }
    });
}

/// Newline-separated statsd lines on one TCP connection.
fn statsd_connection(conn: TcpStream, state: &State, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(POLL));
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        match reader.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) if line.ends_with('\n') => {
                state.line(&line);
                line.clear();
            }
            // A partial line (a read timed out mid-line) stays in `line` for the next read.
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// One HTTP/1.x request: `/metrics` answers the series, anything else 404.
fn serve_metrics(mut conn: TcpStream, state: &State) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = if path == "/metrics" || path.starts_with("/metrics?") {
        ("200 OK", state.render())
    } else {
        ("404 Not Found", "404 page not found\n".to_string())
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPPING: &str = r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2"}
  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    match_metric_type: counter
    labels: {grpc_method: "$1"}
  - match: "dropped.*"
    action: drop
    name: "dropped"
"#;

    fn state() -> State {
        State {
            mappings: read_mappings(MAPPING).unwrap(),
            series: Mutex::new(BTreeMap::new()),
            bad_lines: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn mapped_counters_add_up_under_their_labels() {
        let s = state();
        s.line("ratelimit.service.rate_limit.rl.unspec_x.over_limit:1|c");
        s.line("ratelimit.service.rate_limit.rl.unspec_x.over_limit:2|c");
        s.line("ratelimit.service.rate_limit.rl.unspec_y.over_limit:1|c|@0.5");
        let m = s.render();
        assert!(
            m.contains(
                "ratelimit_service_rate_limit_over_limit{domain=\"rl\",key1=\"unspec_x\"} 3\n"
            ),
            "{m}"
        );
        assert!(m.contains("key1=\"unspec_y\"} 2\n"), "{m}");
        assert_eq!(m.matches("# TYPE").count(), 1, "{m}");
    }

    #[test]
    fn one_star_is_one_part_and_types_must_match() {
        let s = state();
        // Two parts where the glob has one: no mapping, so the escaped name.
        s.line("ratelimit.service.rate_limit.rl.a.b.over_limit:1|c");
        // match_metric_type: counter does not take a gauge.
        s.line("ratelimit_server.ShouldRateLimit.total_requests:4|g");
        s.line("ratelimit_server.ShouldRateLimit.total_requests:-1|g");
        s.line("dropped.x:1|c");
        s.line("not statsd");
        let m = s.render();
        assert!(
            m.contains("ratelimit_service_rate_limit_rl_a_b_over_limit 1\n"),
            "{m}"
        );
        assert!(
            m.contains("ratelimit_server_ShouldRateLimit_total_requests 3\n"),
            "{m}"
        );
        assert!(!m.contains("dropped"), "{m}");
        assert_eq!(*s.bad_lines.lock().unwrap(), vec!["not statsd".to_string()]);
    }

    #[test]
    fn globs_inside_a_part_and_braced_captures() {
        assert_eq!(glob_part("a*c", "abbc"), Some(vec!["bb".to_string()]));
        assert_eq!(glob_part("*_x", "y_x"), Some(vec!["y".to_string()]));
        assert_eq!(glob_part("a*c", "abd"), None);
        assert_eq!(expand("${1}_$2", &["a".into(), "b".into()]), "a_b");
        assert!(read_mappings("mappings:\n  - match: a\n    match_type: regex\n").is_err());
    }
}
