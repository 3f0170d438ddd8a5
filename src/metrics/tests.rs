use super::*;

fn hit(m: &Metrics, limit: u64, before: u64, hits: u64, over: bool) -> [u64; 4] {
    let c = m.rule_counters(&format!("d.k{limit}_{before}_{hits}"));
    m.record_hit(
        &c,
        HitStats {
            limit,
            before,
            hits,
            over,
            penalized: false,
            shadowed: false,
            cached: false,
        },
    );
    [
        c.total_hits.get(),
        c.over_limit.get(),
        c.near_limit.get(),
        c.within_limit.get(),
    ]
}

#[test]
fn their_near_and_over_arithmetic() {
    let m = Metrics::new(0.8, 100, "memory");
    // limit 20: INCRBY 3 → 22 ⇒ over 2, near 1; INCRBY 7 → 22 ⇒ over 2, near 4.
    assert_eq!(hit(&m, 20, 19, 3, true), [3, 2, 1, 0]);
    assert_eq!(hit(&m, 20, 15, 7, true), [7, 2, 4, 0]);
    // Already over: all of it is over.
    assert_eq!(hit(&m, 20, 25, 2, true), [2, 2, 0, 0]);
    // Within, crossing near (16): after 18 ⇒ near 2.
    assert_eq!(hit(&m, 20, 15, 3, false), [3, 0, 2, 3]);
    // Within, already near.
    assert_eq!(hit(&m, 20, 17, 1, false), [1, 0, 1, 1]);
    // Peeks count nothing.
    assert_eq!(hit(&m, 20, 17, 0, false), [0, 0, 0, 0]);
}

#[test]
fn series_are_capped() {
    let m = Metrics::new(0.8, 2, "memory");
    let a = m.rule_counters("d.a");
    let _b = m.rule_counters("d.b");
    let c = m.rule_counters("d.c");
    assert!(Arc::ptr_eq(&c, &m.overflow));
    assert!(Arc::ptr_eq(&a, &m.rule_counters("d.a")));
    assert_eq!(
        m.overflow_total
            .with_label_values(&["ratelimit_service_rate_limit"])
            .get(),
        1
    );
}

#[test]
fn labels_follow_their_mapper() {
    let m = Metrics::new(0.8, 10, "memory");
    m.rule_counters("dom.remote_address_10.0.0.1.path")
        .total_hits
        .inc();
    let text = m.render();
    assert!(
        text.contains(
            "ratelimit_service_rate_limit_total_hits{descriptor=\"dom.remote_address_10.0.0.1.path\",domain=\"dom\",key1=\"remote_address_10_0_0_1\",key2=\"path\"} 1"
        ),
        "{text}"
    );
}

#[test]
fn sanitize_like_theirs() {
    assert_eq!(sanitize("a:b|c"), "a_b_c");
    assert_eq!(sanitize("d.ip_192.168.1.10.x"), "d.ip_192_168_1_10.x");
    assert_eq!(sanitize("d.v1.2.3"), "d.v1.2.3");
}

#[test]
fn response_time_in_milliseconds_keeps_the_name_and_uses_the_default_buckets() {
    let mut m = Metrics::new(0.8, 100, "memory");
    m.observe_response_time(std::time::Duration::from_micros(1500));
    assert!(
        m.render()
            .contains("ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.0025\"} 1"),
        "seconds by default, sluice's buckets"
    );
    m.response_time_in_milliseconds();
    // 3.7 ms is observed as 3 (whole milliseconds, their timer's value).
    m.observe_response_time(std::time::Duration::from_micros(3700));
    let text = m.render();
    let series = |s: &str| {
        text.lines()
            .find(|l| l.starts_with(s))
            .unwrap_or_else(|| panic!("{s} in:\n{text}"))
            .to_string()
    };
    let label = "grpc_method=\"ShouldRateLimit\"";
    assert_eq!(
        series(&format!(
            "ratelimit_service_response_time_seconds_sum{{{label}}}"
        )),
        format!("ratelimit_service_response_time_seconds_sum{{{label}}} 3")
    );
    for (le, n) in [("2.5", 0), ("5", 1), ("10", 1)] {
        let name = format!("ratelimit_service_response_time_seconds_bucket{{{label},le=\"{le}\"}}");
        assert_eq!(series(&name), format!("{name} {n}"));
    }
    // Prometheus's default buckets (Go's DefBuckets), nothing of sluice's sub-ms ones.
    let les: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ratelimit_service_response_time_seconds_bucket"))
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        les,
        [
            "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"
        ]
    );
}
