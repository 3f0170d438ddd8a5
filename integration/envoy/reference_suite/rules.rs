//! The rules the scenarios run against: domain `rl` of envoyproxy/ratelimit's example
//! config (envoyproxy/ratelimit:examples/ratelimit/config/example.yaml at f2fb157), limited
//! to the descriptors the scenarios' requests reach, with the limits, names, `replaces`,
//! shadow and quota modes, `detailed_metric` and metadata it gives them. Rules no scenario
//! reaches (the bare `foo` limit, `baz`'s default, the unlimited `bay` and `qux`, their
//! `mongo_cps` domain) are left out.

/// The file sluice loads (under `RUNTIME_ROOT`/`RUNTIME_SUBDIRECTORY`/`config`).
pub const FILE: &str = "rl.yaml";

pub const RULES: &str = r#"
domain: rl
descriptors:
  # replaces.sh's /fiveheader: one limit standing in for two named ones.
  - key: category
    value: account
    rate_limit:
      unit: minute
      requests_per_unit: 4
      replaces: [{name: bkthomps}, {name: fake_name}]

  # replaces.sh's (source_cluster, destination_cluster) pairs.
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bkthomps
        rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: bkthomps}]}
      - key: destination_cluster
        value: mock
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: destination_cluster
        value: override
        rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: banned_limit}]}
      - key: destination_cluster
        value: fake
        rate_limit: {name: fake_name, unit: minute, requests_per_unit: 2}

  # (foo, bar) and (foo, baz): replaces.sh, trigger-ratelimit.sh, trigger-shadow-mode-key.sh,
  # simple-get.sh.
  - key: foo
    descriptors:
      - key: bar
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: bar
        value: bkthomps
        rate_limit: {name: bkthomps, unit: minute, requests_per_unit: 1}
      - key: bar
        value: banned
        rate_limit: {name: banned_limit, unit: minute, requests_per_unit: 0}
      - key: baz
        value: not-so-shady
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: baz
        value: shady
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 3}

  # value-included-in-stats-key-when-unspecified.sh: the value in the stats key.
  - key: unspec
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}

  # quota.sh, token-quota.sh, multiservice-tokenquota.sh: two quotas, each naming its
  # service in the response's metadata (the proxy routes on it).
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {service_with_quota: {name: service_1}}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata: {service_with_quota: {name: service_2}}
"#;
