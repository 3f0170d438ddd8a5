//! Exporters beside the Prometheus endpoint: the statsd/DogStatsD sink (`statsd`), which
//! reads the same counters as `/metrics` and sends deltas in the background, and
//! OpenTelemetry traces (`trace`), whose spans the service opens per call and per store call.
//!
//! Uses `metrics` (the counters and their statsd names) and `settings` (what to start). The
//! opentelemetry and cadence crates are named only here.

pub mod statsd;
pub mod trace;

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::settings::TelemetrySettings;

pub use trace::{Headers, RequestSpan, StoreSpan, Tracer};

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("statsd: {0}")]
    Statsd(#[from] std::io::Error),
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
}

/// The running exporters, stopped (and flushed) with [`Telemetry::shutdown`].
#[derive(Default)]
pub struct Telemetry {
    statsd: Option<statsd::Statsd>,
    tracer: Option<Arc<Tracer>>,
}

impl Telemetry {
    /// Start what the settings ask for. `metrics` must have had
    /// `Metrics::enable_statsd_timings` called when statsd is on. Runs inside the runtime.
    pub fn start(
        settings: &TelemetrySettings,
        metrics: &Arc<Metrics>,
    ) -> Result<Telemetry, TelemetryError> {
        let tracer = match &settings.tracing {
            Some(t) => {
                let tracer = Tracer::start(t)?;
                tracing::info!(
                    protocol = ?t.protocol,
                    service = %t.service_name,
                    sampling_rate = t.sampling_rate,
                    "tracing enabled"
                );
                Some(Arc::new(tracer))
            }
            None => None,
        };
        let statsd = match &settings.statsd {
            Some(s) => Some(statsd::Statsd::start(s.clone(), metrics.clone())?),
            None => None,
        };
        Ok(Telemetry { statsd, tracer })
    }

    /// The tracer the service uses, when tracing is on.
    pub fn tracer(&self) -> Option<Arc<Tracer>> {
        self.tracer.clone()
    }

    /// Send the last statsd deltas and the buffered spans.
    pub async fn shutdown(self) {
        if let Some(s) = self.statsd {
            let _ = tokio::task::spawn_blocking(move || s.stop()).await;
        }
        if let Some(t) = self.tracer {
            t.shutdown().await;
        }
    }
}
