//! LLM token budgets through a real Envoy, with the configurations of
//! `docs/how-to/limit-llm-tokens.md` read from the page itself (each block whose first line
//! names it): a check at cost 0, the tokens reported at stream end (`%RESP(...)%` or
//! `%DYNAMIC_METADATA(...)%`) against a 30-billion calendar month in `Asia/Kolkata`, counted
//! exactly and reset at the local month's end, on the memory store and on Redis; a tenant's
//! own budget through the per-descriptor `limit` override; and quota-mode rules on such
//! budgets whose response metadata Envoy routes on, as the reference's
//! `multiservice-tokenquota` scenario does.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::envoy::{Envoy, Front, Response, Rls, hcm, http1, serde_yaml_to_json};
use crate::support::in_process::{Server, in_process};
use crate::support::redis::{RedisServer, free_port};
use crate::support::sluice::{WAIT, http_request};

const HOWTO: &str = include_str!("../../docs/how-to/limit-llm-tokens.md");

/// The fenced block of the how-to whose first line is `# <name>`.
fn block(name: &str) -> String {
    let first = format!("# {name}\n");
    HOWTO
        .split("```")
        .skip(1)
        .step_by(2)
        .filter_map(|b| b.split_once('\n').map(|(_, body)| body))
        .find(|body| body.starts_with(&first))
        .unwrap_or_else(|| panic!("docs/how-to/limit-llm-tokens.md has no block `# {name}`"))
        .to_owned()
}

/// The test clock's month in Kolkata (it stands at 2023-11-15T00:00:01Z): it ends at
/// 2023-11-30T18:30Z, midnight on December 1st in India.
const MONTH_END: u64 = 1_701_369_000_000;

/// An Envoy started from `front` with `before` ahead of its ratelimit filter and `after`
/// behind it; its listener.
async fn start(front: &Front, before: Vec<Value>, after: Vec<Value>) -> (Envoy, SocketAddr) {
    let (port, upstream) = (free_port(), free_port());
    let logs = tempfile::TempDir::new().expect("tempdir");
    let mut b = front.bootstrap(port, upstream, &logs.path().join("access.log"));
    let chain = &mut b["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ["http_filters"];
    let list = chain.as_array_mut().expect("http_filters");
    let ratelimit = list.remove(0);
    let router = list.split_off(0);
    list.extend(before);
    list.push(ratelimit);
    list.extend(after);
    list.extend(router);
    let envoy = Envoy::start(b).await;
    (envoy, SocketAddr::from(([127, 0, 0, 1], port)))
}

async fn get(at: SocketAddr, headers: &[(&str, &str)]) -> Response {
    http1(at, "GET", "/", headers, "")
        .await
        .unwrap_or_else(|e| panic!("GET through envoy: {e}"))
}

/// The admin listener's `used` of the first limit of `descriptor` (`/state`).
async fn used(s: &Server, domain: &str, descriptor: &str) -> u64 {
    let admin = s.admin.expect("admin listener");
    let q = format!("/state?domain={domain}&descriptor={descriptor}");
    let (code, body) = http_request(admin, "GET", &q, "").await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    v["limits"][0]["used"].as_u64().expect("used")
}

/// Wait until Envoy's stream-done report has reached sluice: `used` is `want`.
async fn wait_used(s: &Server, domain: &str, descriptor: &str, want: u64) {
    let deadline = std::time::Instant::now() + WAIT;
    let mut last = 0;
    while std::time::Instant::now() < deadline {
        last = used(s, domain, descriptor).await;
        if last == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{descriptor}: used {last}, waited for {want}");
}

/// Where the tokens of a response come from at stream end.
#[derive(Clone, Copy)]
enum Report {
    /// `%RESP(x-tokens)%`: a response header.
    Header,
    /// `%DYNAMIC_METADATA(io.envoy.ai_gateway:llm_total_token)%`, as Envoy AI Gateway
    /// stores it (here copied from the header by a `header_to_metadata` filter).
    Metadata,
}

async fn a_month_of_30_billion_tokens(s: Server, report: Report) {
    let rate_limits = match report {
        Report::Header => block("the ratelimit filter's rate_limits"),
        Report::Metadata => block("rate_limits with Envoy AI Gateway's token count"),
    };
    let front = Front::new("llm", Rls::Tcp(vec![s.grpc]))
        .filter_rate_limits_yaml(&rate_limits)
        .deny_on_failure();
    let filters = match report {
        Report::Header => vec![],
        Report::Metadata => vec![json!({
            "name": "envoy.filters.http.header_to_metadata",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config",
                "response_rules": [{ "header": "x-tokens", "on_header_present": {
                    "metadata_namespace": "io.envoy.ai_gateway", "key": "llm_total_token", "type": "STRING"
                }}]
            }
        })],
    };
    let (envoy, at) = start(&front, vec![], filters).await;
    let tenant = |tokens: &'static str| [("x-tenant-id", "acme"), ("x-tokens-used", tokens)];

    // Nearly the whole month's budget, a billion tokens at a time (Envoy's largest report
    // of one stream): the check at arrival costs 0.
    for i in 0..30 {
        let tokens = if i < 29 { "1000000000" } else { "999999990" };
        let r = get(at, &tenant(tokens)).await;
        assert_eq!(r.status, 200, "{r:?}\n{}", envoy.log());
        if i == 0 {
            // Envoy's own headers come from the uint32 status fields: clamped.
            assert_eq!(r.header("x-ratelimit-remaining"), Some("4294967295"));
        }
    }
    wait_used(&s, "llm", "tenant=acme", 29_999_999_990).await;

    // 10 tokens left: the next stream passes the check and reports more than is left;
    // overdraft charges every token.
    let r = get(at, &tenant("25")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-ratelimit-remaining"), Some("10"));
    wait_used(&s, "llm", "tenant=acme", 30_000_000_015).await;

    // Over: refused until midnight on the 1st in Kolkata.
    let r = get(at, &tenant("7")).await;
    assert_eq!(r.status, 429, "{r:?}");
    let reset: u64 = r
        .header("x-ratelimit-reset")
        .and_then(|v| v.parse().ok())
        .expect("x-ratelimit-reset");
    assert_eq!(reset, (MONTH_END - s.now_ms()).div_ceil(1000));
    // A refused stream reports no tokens.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(used(&s, "llm", "tenant=acme").await, 30_000_000_015);

    s.clock().set(MONTH_END - 1);
    assert_eq!(get(at, &tenant("7")).await.status, 429);
    s.clock().set(MONTH_END);
    let r = get(at, &tenant("7")).await;
    assert_eq!(r.status, 200, "a new month: {r:?}");
    wait_used(&s, "llm", "tenant=acme", 7).await;
}

fn tokens_server() -> crate::support::in_process::Builder {
    in_process().file("llm.yaml", &block("llm.yaml"))
}

#[tokio::test]
async fn a_30_billion_token_month_in_kolkata_reported_at_stream_end_memory() {
    let s = tokens_server().start_healthy().await;
    a_month_of_30_billion_tokens(s, Report::Header).await;
}

#[tokio::test]
async fn a_30_billion_token_month_in_kolkata_reported_at_stream_end_redis() {
    let redis = RedisServer::start();
    let s = tokens_server().redis(redis.url()).start_healthy().await;
    a_month_of_30_billion_tokens(s, Report::Metadata).await;
}

#[tokio::test]
async fn a_tenant_budget_from_the_limit_override() {
    let s = tokens_server().start_healthy().await;
    let front = Front::new("llm", Rls::Tcp(vec![s.grpc]))
        .filter_rate_limits_yaml(&block("rate_limits with a tenant's own limit"))
        .deny_on_failure();
    // What an ext_authz server (through AI Gateway's globalRateLimits) would leave in the
    // request's dynamic metadata: this tenant's limit.
    let set = json!({
        "name": "envoy.filters.http.set_metadata",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config",
            "metadata": [{ "metadata_namespace": "io.envoy.ai_gateway",
                "value": { "tenant_request_limit": { "requests_per_unit": 1000, "unit": "HOUR" } } }]
        }
    });
    // The metadata is set before the ratelimit filter asks.
    let (envoy, at) = start(&front, vec![set], vec![]).await;
    let tenant = |tokens: &'static str| [("x-tenant-id", "small"), ("x-tokens-used", tokens)];
    let r = get(at, &tenant("600")).await;
    assert_eq!(r.status, 200, "{r:?}\n{}", envoy.log());
    // The override's limit, not the rule's: 1000 per hour.
    assert_eq!(r.header("x-ratelimit-remaining"), Some("1000"));
    assert!(
        r.header("x-ratelimit-limit")
            .is_some_and(|l| l.starts_with("1000")),
        "{r:?}"
    );
    // Streams reporting nothing, until the first report has landed: 400 left.
    let remaining = |want: &'static str| async move {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let r = get(at, &tenant("0")).await;
            if r.header("x-ratelimit-remaining") == Some(want) || r.status == 429 && want == "0" {
                return r;
            }
            assert!(std::time::Instant::now() < deadline, "never {want}: {r:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    remaining("400").await;
    // 400 left: the stream passes, reports 600, and the tenant is over for the hour.
    assert_eq!(get(at, &tenant("600")).await.status, 200);
    let r = remaining("0").await;
    assert_eq!(r.status, 429, "{r:?}");
}

/// An upstream listener answering `body` and setting `x-tokens` from `x-tokens-used`.
fn model_listener(name: &str, port: u16) -> Value {
    json!({
        "name": name,
        "address": { "socket_address": { "address": "127.0.0.1", "port_value": port } },
        "filter_chains": [{ "filters": [hcm(name, json!({
            "virtual_hosts": [{ "name": "all", "domains": ["*"], "routes": [
                { "match": { "prefix": "/" },
                  "direct_response": { "status": 200, "body": { "inline_string": format!("answered by {name}\n") } },
                  "response_headers_to_add": [
                      { "header": { "key": "x-tokens", "value": "%REQ(x-tokens-used)%" } }
                  ] }
            ]}]
        }), vec![], None)] }],
    })
}

#[tokio::test]
async fn quota_mode_routes_to_the_model_with_budget_left() {
    let redis = RedisServer::start();
    let s = in_process()
        .file("models.yaml", &block("models.yaml"))
        .env("RESPONSE_DYNAMIC_METADATA", "true")
        .redis(redis.url())
        .start_healthy()
        .await;
    let front = Front::new("models", Rls::Tcp(vec![s.grpc]))
        .filter_rate_limits_yaml(&block("rate_limits that ask every model's budget"))
        .deny_on_failure();
    let after = match serde_yaml_to_json(&block("filters that route on the answer")) {
        Value::Array(filters) => filters,
        other => panic!("a list of filters: {other}"),
    };
    let (port, upstream) = (free_port(), free_port());
    let (a, b) = (free_port(), free_port());
    let logs = tempfile::TempDir::new().expect("tempdir");
    let mut boot = front.bootstrap(port, upstream, &logs.path().join("access.log"));
    let resources = &mut boot["static_resources"];
    let chain =
        resources["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]
            .as_array_mut()
            .expect("http_filters");
    let router = chain.pop().expect("router");
    chain.extend(after);
    chain.push(router);
    resources["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"]
        [0]["routes"][0]["route"]["cluster"] = json!("models");
    let listeners = resources["listeners"].as_array_mut().expect("listeners");
    listeners.push(model_listener("model_a", a));
    listeners.push(model_listener("model_b", b));
    // The how-to's cluster, its endpoints moved to this test's ports.
    let mut cluster = serde_yaml_to_json(&block("the models' cluster"));
    for (i, p) in [a, b].into_iter().enumerate() {
        cluster["load_assignment"]["endpoints"][i]["lb_endpoints"][0]["endpoint"]["address"] =
            json!({ "socket_address": { "address": "127.0.0.1", "port_value": p } });
    }
    resources["clusters"]
        .as_array_mut()
        .expect("clusters")
        .push(cluster);
    let envoy = Envoy::start(boot).await;
    let at = SocketAddr::from(([127, 0, 0, 1], port));

    // Each answer uses a billion tokens (Envoy's largest report of one stream); model_a has
    // 5 billion a month, model_b 6 billion. A check at 0 passes while the count is within
    // the budget: model_a takes 6 answers, model_b 7.
    let ask = || get(at, &[("x-tokens-used", "1000000000")]);
    let mut spent = [0u64, 0];
    let order = std::iter::repeat_n(0, 6).chain(std::iter::repeat_n(1, 7));
    for (i, want) in order.enumerate() {
        let r = ask().await;
        let name = ["model_a", "model_b"][want];
        assert_eq!(r.status, 200, "request {i}: {r:?}\n{}", envoy.log());
        assert_eq!(r.body, format!("answered by {name}\n"), "request {i}");
        spent[want] += 1_000_000_000;
        wait_used(&s, "models", &format!("model={name}"), spent[want]).await;
    }
    // Both budgets spent: every quota descriptor is over, so the request is.
    let r = ask().await;
    assert_eq!(r.status, 429, "{r:?}");
    // A new month in Kolkata: model_a first again.
    s.clock().set(MONTH_END);
    let r = ask().await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "answered by model_a\n"),
        "{r:?}"
    );
}
