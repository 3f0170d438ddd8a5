//! Telemetry settings: statsd/DogStatsD (`USE_STATSD`, `STATSD_HOST`, `STATSD_PORT`,
//! `STATSD_PROTOCOL`, `USE_DOG_STATSD`, `EXTRA_TAGS`, `STATS_FLUSH_INTERVAL`), the
//! Prometheus mapping file (`PROMETHEUS_MAPPER_YAML`), the unit of the response-time
//! histogram (`PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`) and OpenTelemetry tracing
//! (`trace.rs`).
//!
//! statsd is off unless asked for. envoyproxy/ratelimit defaults `USE_STATSD` to true, but
//! sluice's metrics are Prometheus on `/metrics`, and a default sink that sends to
//! `localhost:8125` only produces connection noise where nothing listens. Any deployment
//! that names their statsd variables gets statsd: `USE_STATSD=true`, `USE_DOG_STATSD=true`,
//! or `STATSD_HOST`/`STATSD_PORT` without `USE_STATSD=false` (with their default of true,
//! those take effect there too).

use std::path::PathBuf;
use std::time::Duration;

use super::decl::{RefVar, Setting};
use super::declare::settings;
use super::env::{Env, num_var, var};
use super::parse::{SettingsError, err};
use super::resolver::{Given, Group, Resolver, Source, Value};
use super::trace::{self, TracingSettings};
use super::values::{boolean, none, positive_duration, some_boolean, some_path, some_text};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsdProtocol {
    Udp,
    Tcp,
}

impl Value for StatsdProtocol {}
impl Value for Mogrifier {}

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

/// The reference's godogstats mogrifier: a regex on the stat name; the first that matches renames it
/// and adds tags, with `$n` standing for its captures.
#[derive(Clone, Debug, PartialEq)]
pub struct Mogrifier {
    pub pattern: String,
    pub name: String,
    /// Sorted by key.
    pub tags: Vec<(String, String)>,
}

const STATSD: &[(&str, &str)] = &[("USE_STATSD", "true")];
const DOG: &[(&str, &str)] = &[
    ("USE_DOG_STATSD", "true"),
    ("DOG_STATSD_MOGRIFIER_A_PATTERN", "^ratelimit\\.(.*)$"),
    ("DOG_STATSD_MOGRIFIER_A_NAME", "rl.$1"),
];
const DOG_MOGRIFIED: &[(&str, &str)] = &[
    ("USE_DOG_STATSD", "true"),
    ("USE_DOG_STATSD_MOGRIFIERS", "A"),
    ("DOG_STATSD_MOGRIFIER_A_PATTERN", "^ratelimit\\.(.*)$"),
    ("DOG_STATSD_MOGRIFIER_A_NAME", "rl.$1"),
];
settings! {
    /// statsd, the Prometheus mapping file and tracing.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TelemetrySettings {
        pub statsd: Option<StatsdSettings> = with(statsd, StatsdInput, DogMogrifiers),
        /// statsd_exporter mapping file applied to /metrics
        pub metrics_mapper: Option<PathBuf> = setting(
            Setting::value("metrics-mapper", "PATH", some_path)
                .shown_default("none")
                .see("[mapping](statsd-and-tracing.md#prometheus-mapping-file)")
                .same(RefVar::new("PROMETHEUS_MAPPER_YAML", "/etc/mapper.yaml").does(
                    "statsd_exporter mapping file applied to `/metrics` (`--metrics-mapper`)",
                ))
        ),
        /// `ratelimit_service_response_time_seconds` observes whole milliseconds with the
        /// default Prometheus buckets (their statsd_exporter mapping without its `scale`),
        /// unless a mapping file is given
        pub response_time_ms: bool = setting(
            Setting::ref_only(boolean)
                .default("false")
                .same(RefVar::new("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true").does(
                    "`true`: `ratelimit_service_response_time_seconds` observes whole \
                     milliseconds with the default Prometheus buckets, as their legacy mapping \
                     (ignored with `PROMETHEUS_MAPPER_YAML`, as theirs)",
                ))
        ),
        pub tracing: Option<TracingSettings> = with(trace::tracing, trace::TracingSwitch, TracingSettings),
    }
}

settings! {
    /// statsd's flags and the reference's variables, before deciding whether a sink runs.
    struct StatsdInput {
        /// Send statsd to this host:port
        addr: Given<Option<String>> = setting(
            Setting::value("statsd-addr", "HOST:PORT", some_text)
                .shown_default("off")
                .see("[statsd](statsd-and-tracing.md#statsd-and-dogstatsd)")
                .map(statsd_host_port)
                .shown_vars("`USE_STATSD`, `STATSD_HOST`, `STATSD_PORT`")
                .ref_var(RefVar::new("STATSD_HOST", "statsd.example").does(
                    "statsd target host, `localhost` (`--statsd-addr`); setting it turns statsd \
                     on unless `USE_STATSD=false`",
                ))
                .ref_var(RefVar::new("STATSD_PORT", "9125").does(
                    "statsd target port, 8125; setting it turns statsd on unless \
                     `USE_STATSD=false`",
                ))
        ),
        /// Send statsd; unset, statsd is off here (theirs: on) unless `STATSD_HOST` or
        /// `STATSD_PORT` is set
        use_statsd: Option<bool> = setting(
            Setting::ref_only(some_boolean).same(RefVar::new("USE_STATSD", "true"))
        ),
        /// statsd transport, as theirs: tcp for statsd, udp for DogStatsD
        protocol: Option<StatsdProtocol> = setting(
            Setting::value("statsd-protocol", "PROTOCOL", statsd_protocol)
                .values(&["udp", "tcp"])
                .shown_default("`tcp` (statsd), `udp` (DogStatsD)")
                .same(RefVar::new("STATSD_PROTOCOL", "udp").with(STATSD).library())
        ),
        /// DogStatsD: tags as `|#k:v` instead of `.__k=v` name suffixes
        dogstatsd: bool = setting(
            Setting::switch("dogstatsd").same(RefVar::new("USE_DOG_STATSD", "true").does(
                "send DogStatsD (`--dogstatsd`): tags as DogStatsD tags, UDP by default",
            ))
        ),
        /// Tags on every stat, `k:v,k2:v2`
        tags: Vec<(String, String)> = setting(
            Setting::value("statsd-tags", "TAGS", tags)
                .shown_default("none")
                .same(RefVar::new("EXTRA_TAGS", "team:rl").with(STATSD))
        ),
        /// How often counters are sent, as deltas
        flush_interval: Duration = setting(
            Setting::value("stats-flush-interval", "DURATION", positive_duration)
                .default("10s")
                .same(RefVar::new("STATS_FLUSH_INTERVAL", "1s").with(STATSD))
        ),
        /// No statsd is sent; Prometheus `/metrics` is still served (theirs empties it too)
        disable: bool = setting(
            Setting::ref_only(boolean)
                .default("false")
                .same(RefVar::new("DISABLE_STATS", "true").with(STATSD).does(
                    "`true`: no statsd is sent; Prometheus `/metrics` is still served (theirs \
                     empties it too)",
                ))
        ),
    }
}

settings! {
    /// DogStatsD's renames, read only when DogStatsD is on (as theirs).
    struct DogMogrifiers {
        /// DogStatsD renames and tags
        list: Vec<Mogrifier> = setting(
            Setting::ref_only(none)
                .shown_default("none")
                .map(mogrifiers)
                .shown_vars(
                    "`USE_DOG_STATSD_MOGRIFIERS`, \
                     `DOG_STATSD_MOGRIFIER_<NAME>_PATTERN`/`_NAME`/`_TAGS`",
                )
                .ref_var(RefVar::new("USE_DOG_STATSD_MOGRIFIERS", "A").with(DOG).does(
                    "DogStatsD: the mogrifiers applied to stat names, in the order listed",
                ))
                .ref_var(
                    RefVar::new("DOG_STATSD_MOGRIFIER_*", "service:$1")
                        .probe_as("DOG_STATSD_MOGRIFIER_A_TAGS")
                        .with(DOG_MOGRIFIED)
                        .does(
                            "each listed mogrifier's `_PATTERN` (regex), `_NAME` and `_TAGS` \
                             (`$1`… are its captures)",
                        ),
                )
        ),
    }
}

/// The reference's `STATSD_PROTOCOL` is read by its prefix (`udp4` is udp).
fn statsd_protocol(s: &str) -> Result<Option<StatsdProtocol>, String> {
    let p = s.trim().to_ascii_lowercase();
    match p {
        p if p.starts_with("udp") => Ok(Some(StatsdProtocol::Udp)),
        p if p.starts_with("tcp") => Ok(Some(StatsdProtocol::Tcp)),
        p => Err(format!("'{p}' is not udp or tcp")),
    }
}

/// `STATSD_HOST`/`STATSD_PORT` → `host:port`, when either is set.
fn statsd_host_port(env: Env<'_>) -> Result<Option<Option<String>>, SettingsError> {
    let host = var(env, "STATSD_HOST");
    let port: Option<u16> = num_var(env, "STATSD_PORT")?;
    if host.is_none() && port.is_none() {
        return Ok(None);
    }
    let host = host.unwrap_or_else(|| "localhost".into());
    let port = port.unwrap_or(8125);
    Ok(Some(Some(
        if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        },
    )))
}

fn statsd(r: &Resolver<'_>) -> Result<Option<StatsdSettings>, SettingsError> {
    let i = StatsdInput::from_resolver(r)?;
    if i.use_statsd == Some(true) && i.dogstatsd {
        return Err(err(
            "USE_DOG_STATSD",
            "unable to use more than one stats sink at the same time. Set one of \
             USE_DOG_STATSD, USE_STATSD",
        ));
    }
    let enabled = i.addr.by_sluice()
        || i.dogstatsd
        || i.use_statsd.unwrap_or(i.addr.source == Source::RefVar);
    if !enabled || i.disable {
        return Ok(None);
    }
    let addr = match i.addr.value {
        Some(a) => a.trim().to_string(),
        None => "localhost:8125".into(),
    };
    // gostats' statsd sink dials tcp; datadog-go sends udp.
    let protocol = i.protocol.unwrap_or(if i.dogstatsd {
        StatsdProtocol::Udp
    } else {
        StatsdProtocol::Tcp
    });
    let mogrifiers = match i.dogstatsd {
        true => DogMogrifiers::from_resolver(r)?.list,
        false => Vec::new(),
    };
    Ok(Some(StatsdSettings {
        addr,
        protocol,
        dogstatsd: i.dogstatsd,
        tags: i.tags,
        flush_interval: i.flush_interval,
        mogrifiers,
    }))
}

/// `USE_DOG_STATSD_MOGRIFIERS` and the variables of each mogrifier it lists.
fn mogrifiers(env: Env<'_>) -> Result<Option<Vec<Mogrifier>>, SettingsError> {
    let Some(list) = var(env, "USE_DOG_STATSD_MOGRIFIERS") else {
        return Ok(None);
    };
    read_mogrifiers(&list, env).map(Some)
}

/// `DOG_STATSD_MOGRIFIER_<NAME>_PATTERN`, `_NAME` and `_TAGS` for each listed name, with
/// their checks and messages.
fn read_mogrifiers(list: &str, env: Env<'_>) -> Result<Vec<Mogrifier>, SettingsError> {
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
fn tags(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut tags = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once(':')
            .ok_or_else(|| format!("invalid map item: \"{pair}\""))?;
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

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
