//! The arguments of `sluice explain` (the command is `cli::explain`, the work `explain`).

use std::path::PathBuf;

use clap::Args;

use crate::limit::{Descriptor, parse_bucket, parse_descriptor};

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Rule file or directory; repeatable [default: ./config]
    #[arg(
        long = "config",
        value_name = "PATH",
        env = "SLUICE_CONFIG",
        value_delimiter = ','
    )]
    pub config: Vec<PathBuf>,
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
    /// Prefix of the Redis keys shown [default: sluice:] (also CACHE_KEY_PREFIX)
    #[arg(long, value_name = "PREFIX", env = "SLUICE_CACHE_KEY_PREFIX")]
    pub cache_key_prefix: Option<String>,
    /// Allow one domain to be split over several files (also MERGE_DOMAIN_CONFIG)
    #[arg(long, env = "SLUICE_MERGE_DOMAINS")]
    pub merge_domains: bool,
}
