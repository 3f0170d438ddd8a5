//! OpenTelemetry tracing's settings (`TRACING_*`; the exporter reads the standard
//! `OTEL_EXPORTER_OTLP_*` itself): read only when tracing is on, as theirs.

use super::decl::{RefVar, Setting};
use super::declare::settings;
use super::parse::SettingsError;
use super::resolver::{Group, Resolver, Value};
use super::values::{ratio, some_text, text};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracingProtocol {
    /// OTLP over HTTP/protobuf (port 4318, `/v1/traces`).
    Http,
    /// OTLP over gRPC (port 4317).
    Grpc,
}

impl Value for TracingProtocol {}

const TRACING: &[(&str, &str)] = &[("TRACING_ENABLED", "true")];

settings! {
    /// Whether traces are exported.
    pub(super) struct TracingSwitch {
        /// Export OpenTelemetry spans over OTLP
        on: bool = setting(
            Setting::switch("tracing")
                .see("[tracing](statsd-and-tracing.md#tracing)")
                .same(RefVar::new("TRACING_ENABLED", "true"))
        ),
    }
}

settings! {
    /// OpenTelemetry tracing, when on.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TracingSettings {
        /// OTLP transport: http (HTTP/protobuf) or grpc
        pub protocol: TracingProtocol = setting(
            Setting::value("tracing-protocol", "PROTOCOL", tracing_protocol)
                .values(&["http", "grpc"])
                .default("http")
                .same(RefVar::new("TRACING_EXPORTER_PROTOCOL", "grpc").with(TRACING))
        ),
        /// Resource attribute `service.name`
        pub service_name: String = setting(
            Setting::ref_only(text)
                .default("RateLimit")
                .same(RefVar::new("TRACING_SERVICE_NAME", "sluice").with(TRACING))
        ),
        /// Resource attribute `service.namespace`
        pub service_namespace: Option<String> = setting(
            Setting::ref_only(some_text)
                .shown_default("none")
                .same(RefVar::new("TRACING_SERVICE_NAMESPACE", "edge").with(TRACING))
        ),
        /// Resource attribute `service.instance.id` (unset: a random UUID at startup, as
        /// theirs)
        pub service_instance_id: Option<String> = setting(
            Setting::ref_only(some_text)
                .shown_default("random UUID")
                .same(RefVar::new("TRACING_SERVICE_INSTANCE_ID", "pod-1").with(TRACING).does(
                    "resource attribute `service.instance.id`; unset: a random UUID",
                ))
        ),
        /// Fraction of new traces sampled; a sampled parent is always followed
        pub sampling_rate: f64 = setting(
            Setting::value("tracing-sampling-rate", "RATE", ratio)
                .default("1")
                .same(RefVar::new("TRACING_SAMPLING_RATE", "0.5").with(TRACING))
        ),
    }
}

fn tracing_protocol(s: &str) -> Result<TracingProtocol, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "http" => Ok(TracingProtocol::Http),
        "grpc" => Ok(TracingProtocol::Grpc),
        p => Err(format!("'{p}' is not http or grpc")),
    }
}

pub(super) fn tracing(r: &Resolver<'_>) -> Result<Option<TracingSettings>, SettingsError> {
    if !TracingSwitch::from_resolver(r)?.on {
        return Ok(None);
    }
    TracingSettings::from_resolver(r).map(Some)
}
