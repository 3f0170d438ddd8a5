//! The arguments of `sluice explain` (the command is `cli::explain`, the work `explain`):
//! what to explain, and the settings it shares with `serve` (where the rules are, how they
//! load, the Redis key prefix).

use std::path::PathBuf;

use clap::Args;

use super::declare::settings;
use super::redis_input::CACHE_KEY_PREFIX;
use super::rules::{CONFIG, MERGE_DOMAINS, SANITIZE_METRIC_DOTS};
use crate::limit::{Descriptor, parse_bucket, parse_descriptor};

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The request's domain
    #[arg(long)]
    pub domain: String,
    /// A request descriptor as key=value,key2=value2 (entries in order); repeat for a
    /// request with several descriptors (`replaces` acts between them)
    #[arg(long, value_name = "K=V,...", required_unless_present = "bucket", value_parser = parse_descriptor)]
    pub descriptor: Vec<Descriptor>,
    /// An RLQS bucket (`BucketId`) as key=value,... in any order: explained as the
    /// descriptor a quota stream matches it as, entries sorted by key; repeatable
    #[arg(long, value_name = "K=V,...", value_parser = parse_bucket)]
    pub bucket: Vec<Descriptor>,
    /// Print JSON (the same as the HTTP endpoint /explain) instead of text
    #[arg(long)]
    pub json: bool,
}

settings! {
    /// What `sluice explain` shares with `serve`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ExplainSettings {
        pub config_paths: Vec<PathBuf> = shared(CONFIG),
        /// `None`: the store's default (`sluice:`).
        pub cache_key_prefix: Option<String> = shared(CACHE_KEY_PREFIX),
        pub merge_domains: bool = shared(MERGE_DOMAINS),
        pub sanitize_metric_dots: bool = shared(SANITIZE_METRIC_DOTS),
    }
}
