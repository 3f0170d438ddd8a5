//! Telemetry settings: statsd/DogStatsD (`USE_STATSD`, `STATSD_HOST`, `STATSD_PORT`,
//! `STATSD_PROTOCOL`, `USE_DOG_STATSD`, `EXTRA_TAGS`, `STATS_FLUSH_INTERVAL`), the
//! Prometheus mapping file (`PROMETHEUS_MAPPER_YAML`) and OpenTelemetry tracing
//! (`TRACING_*`; the exporter reads the standard `OTEL_EXPORTER_OTLP_*` itself).
//!
//! statsd is off unless asked for. envoyproxy/ratelimit defaults `USE_STATSD` to true, but
//! sluice's metrics are Prometheus on `/metrics`, and a default sink that sends to
//! `localhost:8125` only produces connection noise where nothing listens. Any deployment
//! that names their statsd variables gets statsd: `USE_STATSD=true`, `USE_DOG_STATSD=true`,
//! or `STATSD_HOST`/`STATSD_PORT` without `USE_STATSD=false` (with their default of true,
//! those take effect there too).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::env::{Env, bool_var, num_var, var};
use super::{SettingsError, err, parse_duration};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatsdProtocol {
    Udp,
    Tcp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TracingProtocol {
    /// OTLP over HTTP/protobuf (port 4318, `/v1/traces`).
    Http,
    /// OTLP over gRPC (port 4317).
    Grpc,
}

#[derive(Debug, Default, Args)]
pub struct TelemetryArgs {
    /// Send statsd to this host:port (also USE_STATSD with STATSD_HOST/STATSD_PORT)
    #[arg(long, value_name = "HOST:PORT", env = "SLUICE_STATSD_ADDR")]
    pub statsd_addr: Option<String>,
    /// statsd transport [default: tcp for statsd as theirs, udp for DogStatsD] (also STATSD_PROTOCOL)
    #[arg(long, value_enum, env = "SLUICE_STATSD_PROTOCOL")]
    pub statsd_protocol: Option<StatsdProtocol>,
    /// DogStatsD: tags as `|#k:v` instead of `.__k=v` name suffixes (also USE_DOG_STATSD)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_DOGSTATSD")]
    pub dogstatsd: Option<bool>,
    /// Tags on every stat, `k:v,k2:v2` (also EXTRA_TAGS)
    #[arg(long, value_name = "TAGS", env = "SLUICE_STATSD_TAGS")]
    pub statsd_tags: Option<String>,
    /// How often counters are sent, as deltas [default: 10s] (also STATS_FLUSH_INTERVAL)
    #[arg(long, value_name = "DURATION", env = "SLUICE_STATS_FLUSH_INTERVAL")]
    pub stats_flush_interval: Option<String>,
    /// statsd_exporter mapping file applied to /metrics (also PROMETHEUS_MAPPER_YAML)
    #[arg(long, value_name = "PATH", env = "SLUICE_METRICS_MAPPER")]
    pub metrics_mapper: Option<PathBuf>,
    /// Export OpenTelemetry traces over OTLP (also TRACING_ENABLED)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_TRACING")]
    pub tracing: Option<bool>,
    /// OTLP transport [default: http] (also TRACING_EXPORTER_PROTOCOL)
    #[arg(long, value_enum, env = "SLUICE_TRACING_PROTOCOL")]
    pub tracing_protocol: Option<TracingProtocol>,
    /// Fraction of new traces sampled; a sampled parent is always followed [default: 1]
    /// (also TRACING_SAMPLING_RATE)
    #[arg(long, value_name = "RATE", env = "SLUICE_TRACING_SAMPLING_RATE")]
    pub tracing_sampling_rate: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StatsdSettings {
    /// `host:port`, resolved when the sink starts (and again after errors).
    pub addr: String,
    pub protocol: StatsdProtocol,
    pub dogstatsd: bool,
    /// Sorted by key; values already sanitized like gostats (`.`, `:`, `|` → `_`).
    pub tags: Vec<(String, String)>,
    pub flush_interval: Duration,
    /// DogStatsD only: `USE_DOG_STATSD_MOGRIFIERS`, in the order listed.
    pub mogrifiers: Vec<Mogrifier>,
}

/// Their godogstats mogrifier: a regex on the stat name; the first that matches renames it
/// and adds tags, with `$n` standing for its captures.
#[derive(Clone, Debug, PartialEq)]
pub struct Mogrifier {
    pub pattern: String,
    pub name: String,
    /// Sorted by key.
    pub tags: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TracingSettings {
    pub protocol: TracingProtocol,
    pub service_name: String,
    pub service_namespace: Option<String>,
    /// `None`: a random UUID at startup (theirs).
    pub service_instance_id: Option<String>,
    pub sampling_rate: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TelemetrySettings {
    pub statsd: Option<StatsdSettings>,
    pub metrics_mapper: Option<PathBuf>,
    pub tracing: Option<TracingSettings>,
}

pub(super) fn resolve(a: &TelemetryArgs, env: Env<'_>) -> Result<TelemetrySettings, SettingsError> {
    Ok(TelemetrySettings {
        statsd: statsd(a, env)?,
        metrics_mapper: a
            .metrics_mapper
            .clone()
            .or_else(|| var(env, "PROMETHEUS_MAPPER_YAML").map(PathBuf::from)),
        tracing: tracing(a, env)?,
    })
}

fn statsd(a: &TelemetryArgs, env: Env<'_>) -> Result<Option<StatsdSettings>, SettingsError> {
    let use_statsd = bool_var(env, "USE_STATSD")?;
    let use_dog = match a.dogstatsd {
        Some(d) => Some(d),
        None => bool_var(env, "USE_DOG_STATSD")?,
    };
    if use_statsd == Some(true) && use_dog == Some(true) {
        return Err(err(
            "USE_DOG_STATSD",
            "unable to use more than one stats sink at the same time. Set one of \
             USE_DOG_STATSD, USE_STATSD",
        ));
    }
    let host = var(env, "STATSD_HOST");
    let port = var(env, "STATSD_PORT");
    let enabled = a.statsd_addr.is_some()
        || use_dog == Some(true)
        || match use_statsd {
            Some(u) => u,
            None => host.is_some() || port.is_some(),
        };
    if !enabled || bool_var(env, "DISABLE_STATS")? == Some(true) {
        return Ok(None);
    }
    let addr = match &a.statsd_addr {
        Some(addr) => addr.trim().to_string(),
        None => {
            let port: u16 = num_var(env, "STATSD_PORT")?.unwrap_or(8125);
            let host = host.unwrap_or_else(|| "localhost".into());
            if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        }
    };
    let dogstatsd = use_dog == Some(true);
    let protocol = match a.statsd_protocol {
        Some(p) => p,
        None => match var(env, "STATSD_PROTOCOL").map(|p| p.trim().to_ascii_lowercase()) {
            Some(p) if p.starts_with("udp") => StatsdProtocol::Udp,
            Some(p) if p.starts_with("tcp") => StatsdProtocol::Tcp,
            Some(p) => return Err(err("STATSD_PROTOCOL", format!("'{p}' is not udp or tcp"))),
            // gostats' statsd sink dials tcp; datadog-go sends udp.
            None if dogstatsd => StatsdProtocol::Udp,
            None => StatsdProtocol::Tcp,
        },
    };
    let (tags_name, tags) = match &a.statsd_tags {
        Some(t) => ("--statsd-tags", Some(t.clone())),
        None => ("EXTRA_TAGS", var(env, "EXTRA_TAGS")),
    };
    let flush_interval = match &a.stats_flush_interval {
        Some(d) => parse_duration("--stats-flush-interval", d)?,
        None => match var(env, "STATS_FLUSH_INTERVAL") {
            Some(d) => parse_duration("STATS_FLUSH_INTERVAL", &d)?,
            None => Duration::from_secs(10),
        },
    };
    if flush_interval.is_zero() {
        return Err(err("STATS_FLUSH_INTERVAL", "must be more than 0"));
    }
    let mogrifiers = match var(env, "USE_DOG_STATSD_MOGRIFIERS") {
        Some(list) if dogstatsd => mogrifiers(&list, env)?,
        _ => Vec::new(),
    };
    Ok(Some(StatsdSettings {
        addr,
        protocol,
        dogstatsd,
        tags: parse_tags(tags_name, tags.as_deref().unwrap_or(""))?,
        flush_interval,
        mogrifiers,
    }))
}

/// `DOG_STATSD_MOGRIFIER_<NAME>_PATTERN`, `_NAME` and `_TAGS` for each listed name, with
/// their checks and messages.
fn mogrifiers(list: &str, env: Env<'_>) -> Result<Vec<Mogrifier>, SettingsError> {
    let mut out = Vec::new();
    for key in list.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        let prefix = format!("DOG_STATSD_MOGRIFIER_{key}");
        let pattern = var(env, &format!("{prefix}_PATTERN")).ok_or_else(|| {
            err(
                "USE_DOG_STATSD_MOGRIFIERS",
                format!("no PATTERN specified for mogrifier {key}"),
            )
        })?;
        if let Err(e) = regex::Regex::new(&pattern) {
            return Err(err(
                &format!("{prefix}_PATTERN"),
                format!("failed to compile pattern for {key}: {pattern}: {e}"),
            ));
        }
        let name = var(env, &format!("{prefix}_NAME")).ok_or_else(|| {
            err(
                "USE_DOG_STATSD_MOGRIFIERS",
                format!("no NAME specified for mogrifier {key}"),
            )
        })?;
        let tags_var = format!("{prefix}_TAGS");
        let mut tags = Vec::new();
        for pair in var(env, &tags_var)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair
                .split_once(':')
                .ok_or_else(|| err(&tags_var, format!("invalid map item: \"{pair}\"")))?;
            if k.is_empty() || v.is_empty() {
                return Err(err(
                    &tags_var,
                    format!("no key or value specified for tag {k} for mogrifier {key}"),
                ));
            }
            tags.push((k.to_string(), v.to_string()));
        }
        tags.sort();
        out.push(Mogrifier {
            pattern,
            name,
            tags,
        });
    }
    Ok(out)
}

/// envconfig's map syntax, as their `EXTRA_TAGS` is read: `k:v,k2:v2`. Values are cleaned
/// like gostats does before putting them in a name (`.`, `:` and `|` become `_`).
pub fn parse_tags(name: &str, s: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut tags = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once(':')
            .ok_or_else(|| err(name, format!("invalid map item: \"{pair}\"")))?;
        if k.is_empty() || v.is_empty() {
            continue;
        }
        let v: String = v
            .chars()
            .map(|c| if matches!(c, '.' | ':' | '|') { '_' } else { c })
            .collect();
        tags.retain(|(key, _): &(String, String)| key != k);
        tags.push((k.to_string(), v));
    }
    tags.sort();
    Ok(tags)
}

fn tracing(a: &TelemetryArgs, env: Env<'_>) -> Result<Option<TracingSettings>, SettingsError> {
    let enabled = match a.tracing {
        Some(t) => t,
        None => bool_var(env, "TRACING_ENABLED")?.unwrap_or(false),
    };
    if !enabled {
        return Ok(None);
    }
    let protocol = match a.tracing_protocol {
        Some(p) => p,
        None => {
            match var(env, "TRACING_EXPORTER_PROTOCOL").map(|p| p.trim().to_ascii_lowercase()) {
                None => TracingProtocol::Http,
                Some(p) if p == "http" => TracingProtocol::Http,
                Some(p) if p == "grpc" => TracingProtocol::Grpc,
                Some(p) => {
                    return Err(err(
                        "TRACING_EXPORTER_PROTOCOL",
                        format!("'{p}' is not http or grpc"),
                    ));
                }
            }
        }
    };
    let sampling_rate = match a.tracing_sampling_rate {
        Some(r) => r,
        None => num_var(env, "TRACING_SAMPLING_RATE")?.unwrap_or(1.0),
    };
    if !(0.0..=1.0).contains(&sampling_rate) {
        return Err(err("TRACING_SAMPLING_RATE", "must be between 0 and 1"));
    }
    Ok(Some(TracingSettings {
        protocol,
        service_name: var(env, "TRACING_SERVICE_NAME").unwrap_or_else(|| "RateLimit".into()),
        service_namespace: var(env, "TRACING_SERVICE_NAMESPACE"),
        service_instance_id: var(env, "TRACING_SERVICE_INSTANCE_ID"),
        sampling_rate,
    }))
}

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
