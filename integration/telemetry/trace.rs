//! OpenTelemetry through the real binary: an OTLP receiver inside the test (a tonic
//! `TraceService` for gRPC, an axum route for HTTP/protobuf) receives the request span and
//! the store span, in the trace Envoy's `traceparent` (or B3) started, with the service name.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;

use crate::support::sluice::*;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

/// (name, trace id, parent span id, span id, service.name) of every span received.
type SpanRow = (String, String, String, String, String);

impl Received {
    fn spans(&self) -> Vec<SpanRow> {
        let mut out = Vec::new();
        for req in self.0.lock().unwrap().iter() {
            for rs in &req.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                    .map(|v| match v {
                        Value::StringValue(s) => s.clone(),
                        other => format!("{other:?}"),
                    })
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    for s in &ss.spans {
                        out.push((
                            s.name.clone(),
                            hex(&s.trace_id),
                            hex(&s.parent_span_id),
                            hex(&s.span_id),
                            service.clone(),
                        ));
                    }
                }
            }
        }
        out
    }

    async fn wait_for(&self, n: usize) -> Vec<SpanRow> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans();
            if spans.len() >= n || Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn grpc_receiver() -> (Received, u16) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let svc = TraceServiceServer::new(received.clone());
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await;
    });
    (received, port)
}

async fn http_receiver() -> (Received, u16) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let store = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let store = store.clone();
            async move {
                match ExportTraceServiceRequest::decode(body) {
                    Ok(r) => {
                        store.0.lock().unwrap().push(r);
                        (axum::http::StatusCode::OK, Vec::new())
                    }
                    Err(_) => (axum::http::StatusCode::BAD_REQUEST, Vec::new()),
                }
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (received, port)
}

async fn traced_call(s: &Sluice, key: &'static str, value: &str) {
    let mut c = s.client().await;
    let mut r = tonic::Request::new(req("d", vec![desc(&[("k", "x")])]));
    r.metadata_mut()
        .insert(key, value.parse().expect("metadata"));
    c.should_rate_limit(r).await.expect("ShouldRateLimit");
}

fn tracing_sluice(protocol: &str, port: u16) -> Builder {
    sluice()
        .file("rules.yaml", super::RULES)
        .env("TRACING_ENABLED", "true")
        .env("TRACING_EXPORTER_PROTOCOL", protocol)
        .env("TRACING_SERVICE_NAME", "sluice-under-test")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
}

fn assert_continued(spans: &[SpanRow]) {
    let request = spans
        .iter()
        .find(|s| s.0 == "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
        .unwrap_or_else(|| panic!("no request span: {spans:?}"));
    assert_eq!(request.1, TRACE, "{spans:?}");
    assert_eq!(request.2, PARENT, "{spans:?}");
    assert_eq!(request.4, "sluice-under-test");
    let store = spans
        .iter()
        .find(|s| s.0 == "sluice.store.run")
        .unwrap_or_else(|| panic!("no store span: {spans:?}"));
    assert_eq!(
        (store.1.as_str(), store.2.as_str()),
        (TRACE, request.3.as_str())
    );
}

#[tokio::test]
async fn grpc_export_continues_the_w3c_trace() {
    let (received, port) = grpc_receiver().await;
    let s = tracing_sluice("grpc", port).start().await;
    traced_call(&s, "traceparent", &format!("00-{TRACE}-{PARENT}-01")).await;
    assert_continued(&received.wait_for(2).await);
}

#[tokio::test]
async fn http_export_continues_the_b3_trace() {
    let (received, port) = http_receiver().await;
    let s = tracing_sluice("http", port).start().await;
    traced_call(&s, "b3", &format!("{TRACE}-{PARENT}-1")).await;
    assert_continued(&received.wait_for(2).await);
}

#[tokio::test]
async fn unsampled_parent_exports_nothing_and_off_means_off() {
    let (received, port) = grpc_receiver().await;
    let s = tracing_sluice("grpc", port).start().await;
    traced_call(&s, "traceparent", &format!("00-{TRACE}-{PARENT}-00")).await;
    // A sampled call afterwards proves the exporter works; the unsampled one never arrives.
    let other = "00-11111111111111111111111111111111-2222222222222222-01";
    traced_call(&s, "traceparent", other).await;
    let spans = received.wait_for(2).await;
    assert!(spans.iter().all(|s| s.1 != TRACE), "{spans:?}");
    drop(s);

    let (quiet, port) = grpc_receiver().await;
    let s = sluice()
        .file("rules.yaml", super::RULES)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .start()
        .await;
    traced_call(&s, "traceparent", &format!("00-{TRACE}-{PARENT}-01")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(quiet.spans().is_empty());
}
