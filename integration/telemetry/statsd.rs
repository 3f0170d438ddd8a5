//! statsd and DogStatsD: the exact lines their sinks would send, read by a listener the test
//! owns. A one-hour flush interval and SIGTERM make the final flush carry every count in one
//! go, so lines are exact; a short interval shows counters sent as deltas.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::support::sluice::*;

async fn three_calls(s: &Sluice) {
    let mut c = s.client().await;
    for _ in 0..3 {
        call(&mut c, req("d", vec![desc(&[("k", "x")])])).await;
    }
}

fn udp_listener() -> (UdpSocket, u16) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let port = sock.local_addr().expect("addr").port();
    (sock, port)
}

/// Every line received until `done` holds or the deadline passes.
fn read_udp(sock: &UdpSocket, timeout: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut lines = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline && !done(&lines) {
        if let Ok(n) = sock.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            lines.extend(text.lines().filter(|l| !l.is_empty()).map(String::from));
        }
    }
    lines
}

/// Split timer lines from the rest; check the timers add up to `calls` samples.
fn counters_and_timer_samples(
    lines: Vec<String>,
    timer_prefix: &str,
    tag: &str,
) -> (Vec<String>, f64) {
    let (timers, mut counters): (Vec<String>, Vec<String>) =
        lines.into_iter().partition(|l| l.starts_with(timer_prefix));
    counters.sort();
    let mut samples = 0.0;
    for t in timers {
        // name:ms|ms[|@rate][tag]
        let rest = t.strip_prefix(timer_prefix).expect("prefix");
        let rest = rest
            .strip_suffix(tag)
            .unwrap_or_else(|| panic!("tag on {t}"));
        let mut parts = rest.split('|');
        let ms: u64 = parts.next().and_then(|v| v.parse().ok()).expect("ms value");
        assert!(ms < 10_000, "{t}");
        assert_eq!(parts.next(), Some("ms"), "{t}");
        samples += match parts.next() {
            Some(rate) => {
                1.0 / rate
                    .strip_prefix('@')
                    .and_then(|r| r.parse::<f64>().ok())
                    .expect("rate")
            }
            None => 1.0,
        };
    }
    (counters, samples.round())
}

#[tokio::test]
async fn dogstatsd_lines_with_extra_tags() {
    let (sock, port) = udp_listener();
    let mut s = sluice()
        .file("rules.yaml", super::RULES)
        .env("USE_DOG_STATSD", "true")
        .env("USE_STATSD", "false")
        .env("STATSD_HOST", "127.0.0.1")
        .env("STATSD_PORT", port.to_string())
        .env("EXTRA_TAGS", "env:test,zone:eu.west")
        .env("STATS_FLUSH_INTERVAL", "1h")
        .start()
        .await;
    three_calls(&s).await;
    s.signal("TERM");
    assert!(s.wait_exit(Duration::from_secs(15)).await.is_some());
    let lines = read_udp(&sock, Duration::from_secs(2), |_| false);
    let tag = "|#env:test,zone:eu_west";
    let (counters, samples) = counters_and_timer_samples(
        lines,
        "ratelimit_server.ShouldRateLimit.response_time:",
        tag,
    );
    let want: Vec<String> = [
        "ratelimit.service.config_load_success:1|c",
        "ratelimit.service.rate_limit.d.k.near_limit:1|c",
        "ratelimit.service.rate_limit.d.k.over_limit:1|c",
        "ratelimit.service.rate_limit.d.k.total_hits:3|c",
        "ratelimit.service.rate_limit.d.k.within_limit:2|c",
        "ratelimit_server.ShouldRateLimit.total_requests:3|c",
    ]
    .iter()
    .map(|l| format!("{l}{tag}"))
    .collect();
    assert_eq!(counters, want);
    assert_eq!(samples, 3.0);
}

#[tokio::test]
async fn statsd_over_udp_puts_tags_in_the_name_and_sends_deltas() {
    let (sock, port) = udp_listener();
    let s = sluice()
        .file("rules.yaml", super::RULES)
        .env("USE_STATSD", "true")
        .env("STATSD_PROTOCOL", "udp")
        .env("STATSD_HOST", "127.0.0.1")
        .env("STATSD_PORT", port.to_string())
        .env("EXTRA_TAGS", "env:test")
        .env("STATS_FLUSH_INTERVAL", "100ms")
        .start()
        .await;
    let hits = "ratelimit.service.rate_limit.d.k.total_hits.__env=test:1|c".to_string();
    let mut c = s.client().await;
    for round in 0..2 {
        call(&mut c, req("d", vec![desc(&[("k", "x")])])).await;
        // Each flush carries the change since the previous one: 1, then 1 again (not 2).
        let lines = read_udp(&sock, Duration::from_secs(10), |l| l.contains(&hits));
        assert!(lines.contains(&hits), "round {round}: {lines:?}");
        assert!(
            lines.iter().any(|l| l
                .starts_with("ratelimit_server.ShouldRateLimit.response_time.__env=test:")
                && l.ends_with("|ms")),
            "{lines:?}"
        );
    }
}

#[tokio::test]
async fn statsd_defaults_to_tcp_like_theirs() {
    use tokio::io::AsyncBufReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut s = sluice()
        .file("rules.yaml", super::RULES)
        .env("STATSD_HOST", "127.0.0.1")
        .env("STATSD_PORT", port.to_string())
        .env("STATS_FLUSH_INTERVAL", "1h")
        .start()
        .await;
    three_calls(&s).await;
    s.signal("TERM");
    let (conn, _) = tokio::time::timeout(Duration::from_secs(15), listener.accept())
        .await
        .expect("sluice connected")
        .expect("accept");
    let mut lines = Vec::new();
    let mut reader = tokio::io::BufReader::new(conn).lines();
    while let Ok(Ok(Some(l))) =
        tokio::time::timeout(Duration::from_secs(15), reader.next_line()).await
    {
        lines.push(l);
    }
    assert!(s.wait_exit(Duration::from_secs(15)).await.is_some());
    let (counters, samples) =
        counters_and_timer_samples(lines, "ratelimit_server.ShouldRateLimit.response_time:", "");
    assert_eq!(
        counters,
        [
            "ratelimit.service.config_load_success:1|c",
            "ratelimit.service.rate_limit.d.k.near_limit:1|c",
            "ratelimit.service.rate_limit.d.k.over_limit:1|c",
            "ratelimit.service.rate_limit.d.k.total_hits:3|c",
            "ratelimit.service.rate_limit.d.k.within_limit:2|c",
            "ratelimit_server.ShouldRateLimit.total_requests:3|c",
        ]
    );
    assert_eq!(samples, 3.0);
}

#[tokio::test]
async fn statsd_stays_off_without_their_variables() {
    let s = sluice().file("rules.yaml", super::RULES).start().await;
    assert!(!s.logs().iter().any(|l| l.contains("statsd sink started")));
    let refused = sluice()
        .file("rules.yaml", super::RULES)
        .env("USE_STATSD", "true")
        .env("USE_DOG_STATSD", "true")
        .try_start()
        .await
        .err()
        .expect("two sinks refused");
    assert!(
        refused.contains("unable to use more than one stats sink"),
        "{refused}"
    );
}

#[tokio::test]
async fn dogstatsd_mogrifiers_rename_and_tag() {
    let (sock, port) = udp_listener();
    let mut s = sluice()
        .file("rules.yaml", super::RULES)
        .env("USE_STATSD", "false")
        .env("USE_DOG_STATSD", "true")
        .env("STATSD_HOST", "127.0.0.1")
        .env("STATSD_PORT", port.to_string())
        .env("EXTRA_TAGS", "env:test")
        .env("USE_DOG_STATSD_MOGRIFIERS", "HITS")
        .env(
            "DOG_STATSD_MOGRIFIER_HITS_PATTERN",
            r"^ratelimit\.service\.rate_limit\.([^.]+)\.(.+)\.total_hits$",
        )
        .env("DOG_STATSD_MOGRIFIER_HITS_NAME", "ratelimit.hits")
        .env("DOG_STATSD_MOGRIFIER_HITS_TAGS", "domain:$1,key:$2")
        .env("STATS_FLUSH_INTERVAL", "1h")
        .start()
        .await;
    let mut c = s.client().await;
    call(&mut c, req("d", vec![desc(&[("k", "x")])])).await;
    s.signal("TERM");
    assert!(s.wait_exit(Duration::from_secs(15)).await.is_some());
    let lines = read_udp(&sock, Duration::from_secs(2), |_| false);
    assert!(
        lines.contains(&"ratelimit.hits:1|c|#env:test,domain:d,key:k".to_string()),
        "{lines:?}"
    );
    // Names no pattern matches are sent unchanged.
    assert!(
        lines.contains(&"ratelimit.service.rate_limit.d.k.within_limit:1|c|#env:test".to_string()),
        "{lines:?}"
    );
}
