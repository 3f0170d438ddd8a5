//! Rendering through a mapping: each gathered series with a statsd name is renamed and
//! relabelled; series that land on the same name and labels are summed; a series whose label
//! names differ from the first one of its family is rejected, as statsd_exporter does.

use std::collections::{BTreeMap, HashMap};

use prometheus::proto::{Counter, Histogram, LabelPair, Metric, MetricFamily, MetricType};

use super::{Mapper, StatType};

/// An output family's label names and its series (by label values → index).
type Family = (Vec<String>, HashMap<Vec<String>, usize>);

/// The statsd identity of a gathered series, when it has one.
fn statsd_name(family: &str, m: &Metric) -> Option<(String, StatType)> {
    let label = |n: &str| {
        m.get_label()
            .iter()
            .find(|l| l.name() == n)
            .map(|l| l.value().to_string())
    };
    if let Some(stat) = family.strip_prefix("ratelimit_service_rate_limit_") {
        // The label is the stats key as written; the statsd name is sanitized (theirs).
        let key = crate::metrics::sanitize(&label("descriptor")?);
        return Some((
            format!("{}{key}.{stat}", crate::metrics::statsd::RATE_LIMIT_PREFIX),
            StatType::Counter,
        ));
    }
    let name = match family {
        "ratelimit_service_should_rate_limit_error" => format!(
            "ratelimit.service.call.should_rate_limit.{}",
            label("err_type")?
        ),
        "ratelimit_service_total_requests" => {
            format!("ratelimit_server.{}.total_requests", label("grpc_method")?)
        }
        "ratelimit_service_response_time_seconds" => {
            let n = format!("ratelimit_server.{}.response_time", label("grpc_method")?);
            return Some((n, StatType::Observer));
        }
        "ratelimit_service_config_load_success" => "ratelimit.service.config_load_success".into(),
        "ratelimit_service_config_load_error" => "ratelimit.service.config_load_error".into(),
        "ratelimit_service_global_shadow_mode" => "ratelimit.service.global_shadow_mode".into(),
        _ => return None,
    };
    Some((name, StatType::Counter))
}

impl Mapper {
    /// Rename and relabel the gathered families (see the module comment).
    pub fn apply(&self, families: Vec<MetricFamily>) -> Vec<MetricFamily> {
        let mut out: Vec<MetricFamily> = Vec::new();
        let mut mapped: BTreeMap<String, MetricFamily> = BTreeMap::new();
        // Per output family: its label names (the first series fixes them, as
        // statsd_exporter's registry does) and its series by label values.
        let mut index: HashMap<String, Family> = HashMap::new();
        for mut fam in families {
            let fam_name = fam.name().to_string();
            if statsd_name(
                &fam_name,
                fam.get_metric().first().unwrap_or(&Metric::default()),
            )
            .is_none()
            {
                out.push(fam);
                continue;
            }
            let help = fam.help().to_string();
            let kind = fam.get_field_type();
            for metric in fam.take_metric() {
                let Some((sname, stype)) = statsd_name(&fam_name, &metric) else {
                    continue;
                };
                let Some((name, labels)) = self.map(&sname, stype) else {
                    continue;
                };
                let names: Vec<String> = labels.iter().map(|(k, _)| k.clone()).collect();
                let values: Vec<String> = labels.iter().map(|(_, v)| v.clone()).collect();
                let (label_names, series) = index
                    .entry(name.clone())
                    .or_insert_with(|| (names.clone(), HashMap::new()));
                let target = mapped.entry(name.clone()).or_insert_with(|| {
                    let mut f = MetricFamily::default();
                    f.set_name(name.clone());
                    f.set_help(help.clone());
                    f.set_field_type(kind);
                    f
                });
                if *label_names != names || target.get_field_type() != kind {
                    // statsd_exporter rejects a conflicting series; so does sluice.
                    continue;
                }
                match series.get(&values) {
                    Some(&i) => merge(
                        &mut target.mut_metric()[i],
                        &metric,
                        kind == MetricType::HISTOGRAM,
                    ),
                    None => {
                        let mut m = metric;
                        m.set_label(
                            labels
                                .into_iter()
                                .map(|(k, v)| {
                                    let mut p = LabelPair::default();
                                    p.set_name(k);
                                    p.set_value(v);
                                    p
                                })
                                .collect(),
                        );
                        series.insert(values, target.get_metric().len());
                        target.mut_metric().push(m);
                    }
                }
            }
        }
        out.extend(mapped.into_values().filter(|f| !f.get_metric().is_empty()));
        out.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }
}

/// Add `from`'s samples into `into` (same type).
fn merge(into: &mut Metric, from: &Metric, histogram: bool) {
    if histogram {
        let (a, b) = (into.get_histogram(), from.get_histogram());
        let mut h = Histogram::default();
        h.set_sample_count(a.get_sample_count() + b.get_sample_count());
        h.set_sample_sum(a.get_sample_sum() + b.get_sample_sum());
        let mut buckets = a.get_bucket().to_vec();
        for (x, y) in buckets.iter_mut().zip(b.get_bucket()) {
            x.set_cumulative_count(x.cumulative_count() + y.cumulative_count());
        }
        h.set_bucket(buckets);
        into.set_histogram(h);
    } else {
        let mut c = Counter::default();
        c.set_value(into.get_counter().get_value() + from.get_counter().get_value());
        into.set_counter(c);
    }
}
