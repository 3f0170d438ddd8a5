//! OpenTelemetry traces with envoyproxy/ratelimit's settings: a server span per
//! `ShouldRateLimit` (named like their otelgrpc span) continuing the trace Envoy sent (W3C
//! `traceparent`/`tracestate`, or B3 `b3` / `x-b3-*`), and a client span per store call.
//! Sampling is theirs: ParentBased(TraceIdRatio(`TRACING_SAMPLING_RATE`)). Spans are
//! batched and exported over OTLP, gRPC (tonic) or HTTP/protobuf (hyper), on the tokio
//! runtime; the exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables itself.
//!
//! When tracing is off nothing here exists: the service holds `None` and creates no span.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, SpanRef, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, SpanId};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::runtime;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, Sampler, SdkTracer, SdkTracerProvider,
};

use crate::settings::{TracingProtocol, TracingSettings};

/// Their otelgrpc server span name for the call.
pub const REQUEST_SPAN: &str = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
/// The store call (one Redis round trip, or the in-memory store).
pub const STORE_SPAN: &str = "sluice.store.run";

/// Request headers (gRPC metadata) as the propagators read them.
pub trait Headers {
    fn get(&self, name: &str) -> Option<&str>;
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("tracing: {0}")]
    Exporter(String),
    #[error(
        "tracing: {var}={value}: OTLP over TLS is not supported; export to a collector over plain http:// (a local agent or sidecar)"
    )]
    Tls { var: &'static str, value: String },
}

pub struct Tracer {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    sampling_rate: f64,
}

impl Tracer {
    /// Build the exporter and provider; must run inside the tokio runtime.
    pub fn start(s: &TracingSettings) -> Result<Tracer, TraceError> {
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            if let Ok(value) = std::env::var(var)
                && value.trim().to_ascii_lowercase().starts_with("https:")
            {
                return Err(TraceError::Tls { var, value });
            }
        }
        let exporter = match s.protocol {
            TracingProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_protocol(Protocol::Grpc)
                .build(),
            TracingProtocol::Http => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
        }
        .map_err(|e| TraceError::Exporter(e.to_string()))?;
        let instance = s.service_instance_id.clone().unwrap_or_else(random_uuid);
        let mut resource = Resource::builder()
            .with_service_name(s.service_name.clone())
            .with_attribute(KeyValue::new("service.instance.id", instance));
        if let Some(ns) = &s.service_namespace {
            resource = resource.with_attribute(KeyValue::new("service.namespace", ns.clone()));
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter, runtime::Tokio).build())
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                s.sampling_rate,
            ))))
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("sluice");
        Ok(Tracer {
            provider,
            tracer,
            sampling_rate: s.sampling_rate,
        })
    }

    /// Export what is buffered and stop.
    pub async fn shutdown(&self) {
        let provider = self.provider.clone();
        // The provider waits on its batch task, which runs on this runtime: block elsewhere.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }

    /// Start the server span of one call, child of the caller's trace when it sent one.
    pub fn request(&self, headers: &dyn Headers, domain: &str, descriptors: usize) -> RequestSpan {
        let parent = self.extract(headers);
        let span = self
            .tracer
            .span_builder(REQUEST_SPAN)
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("rpc.system", "grpc"),
                KeyValue::new("rpc.service", "envoy.service.ratelimit.v3.RateLimitService"),
                KeyValue::new("rpc.method", "ShouldRateLimit"),
                KeyValue::new("ratelimit.domain", domain.to_string()),
                KeyValue::new("ratelimit.descriptors", descriptors as i64),
            ])
            .start_with_context(&self.tracer, &parent);
        RequestSpan {
            cx: parent.with_span(span),
            tracer: self.tracer.clone(),
        }
    }

    fn extract(&self, headers: &dyn Headers) -> Context {
        let cx = TraceContextPropagator::new().extract(&Carrier(headers));
        if cx.span().span_context().is_valid() {
            return cx;
        }
        match b3(headers, self.sampling_rate) {
            Some(sc) => Context::new().with_remote_span_context(sc),
            None => Context::new(),
        }
    }
}

/// The span of one call; ends when dropped (or with [`RequestSpan::finish`]).
pub struct RequestSpan {
    cx: Context,
    tracer: SdkTracer,
}

impl RequestSpan {
    /// A child span around the store call; ends when dropped.
    pub fn store(&self, store: &'static str) -> StoreSpan {
        let mut attrs = vec![KeyValue::new("sluice.store", store)];
        if store == "redis" {
            attrs.push(KeyValue::new("db.system", "redis"));
        }
        StoreSpan(
            self.tracer
                .span_builder(STORE_SPAN)
                .with_kind(SpanKind::Client)
                .with_attributes(attrs)
                .start_with_context(&self.tracer, &self.cx),
        )
    }

    /// Record the outcome: the overall code, or the error (span status Error).
    pub fn finish(self, result: Result<&'static str, &dyn std::fmt::Display>) {
        let span: SpanRef<'_> = self.cx.span();
        match result {
            Ok(code) => span.set_attribute(KeyValue::new("ratelimit.overall_code", code)),
            Err(e) => span.set_status(Status::error(e.to_string())),
        }
        span.end();
    }
}

pub struct StoreSpan(opentelemetry_sdk::trace::Span);

impl StoreSpan {
    pub fn failed(&mut self, e: &dyn std::fmt::Display) {
        self.0.set_status(Status::error(e.to_string()));
    }
}

struct Carrier<'a>(&'a dyn Headers);

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)
    }
    fn keys(&self) -> Vec<&str> {
        Vec::new()
    }
}

/// B3 (`b3: trace-span[-sampled[-parent]]`, or `x-b3-traceid`/`-spanid`/`-sampled`/`-flags`).
/// 64-bit trace ids are left-padded. A deferred decision (no sampled flag) is made here with
/// the same ratio as new traces.
fn b3(h: &dyn Headers, rate: f64) -> Option<SpanContext> {
    let (trace, span, sampled) = match h.get("b3") {
        Some(single) => {
            let mut parts = single.trim().split('-');
            let (t, s) = (parts.next()?, parts.next()?);
            (
                t.to_string(),
                s.to_string(),
                parts.next().map(str::to_string),
            )
        }
        None => (
            h.get("x-b3-traceid")?.trim().to_string(),
            h.get("x-b3-spanid")?.trim().to_string(),
            match h.get("x-b3-flags").map(str::trim) {
                Some("1") => Some("d".to_string()),
                _ => h.get("x-b3-sampled").map(|s| s.trim().to_string()),
            },
        ),
    };
    if !(trace.len() == 16 || trace.len() == 32) || span.len() != 16 {
        return None;
    }
    let trace_id = TraceId::from_hex(&format!("{trace:0>32}")).ok()?;
    let span_id = SpanId::from_hex(&span).ok()?;
    let sampled = match sampled.as_deref() {
        Some("1" | "d" | "true") => true,
        Some("0" | "false") => false,
        Some(_) => return None,
        None => ratio_sampled(trace_id, rate),
    };
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let sc = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    sc.is_valid().then_some(sc)
}

/// The TraceIdRatio decision: the low 63 bits of the trace id against the rate.
fn ratio_sampled(id: TraceId, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    let bytes = id.to_bytes();
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[8..]);
    let x = u64::from_be_bytes(low) >> 1;
    (x as f64) < rate * (1u64 << 63) as f64
}

/// A random UUID (v4 layout), their default `TRACING_SERVICE_INSTANCE_ID`.
fn random_uuid() -> String {
    let mut b = RandomIdGenerator::default().new_trace_id().to_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct H(Vec<(&'static str, &'static str)>);
    impl Headers for H {
        fn get(&self, name: &str) -> Option<&str> {
            self.0.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
        }
    }

    #[test]
    fn b3_single_and_multi() {
        let sc = b3(
            &H(vec![(
                "b3",
                "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1",
            )]),
            0.0,
        )
        .unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "80f198ee56343ba864fe8b2a57d3eff7"
        );
        assert_eq!(sc.span_id().to_string(), "e457b5a2e4d86bd1");
        assert!(sc.is_sampled() && sc.is_remote());
        let sc = b3(
            &H(vec![
                ("x-b3-traceid", "64fe8b2a57d3eff7"),
                ("x-b3-spanid", "e457b5a2e4d86bd1"),
                ("x-b3-sampled", "0"),
            ]),
            1.0,
        )
        .unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "000000000000000064fe8b2a57d3eff7"
        );
        assert!(!sc.is_sampled());
        assert!(b3(&H(vec![("b3", "nothex-e457b5a2e4d86bd1")]), 1.0).is_none());
        assert!(b3(&H(vec![]), 1.0).is_none());
    }

    #[test]
    fn uuid_shape() {
        let u = random_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, random_uuid());
    }
}
