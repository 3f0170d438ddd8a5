//! `sluice query` arguments: which server, which request, how to print the answer.

use std::path::PathBuf;

use clap::Args;

use crate::limit::{Descriptor, parse_descriptor};

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// Server: host:port, http://host:port, or https://host:port (TLS)
    #[arg(long, value_name = "ADDR", default_value = "localhost:8081")]
    pub addr: String,
    /// Rate limit domain
    #[arg(long)]
    pub domain: String,
    /// A descriptor as its entries, KEY=VALUE[,KEY=VALUE…]; repeat for several descriptors
    #[arg(
        long = "descriptor",
        short = 'd',
        value_name = "KEY=VALUE,…",
        required = true,
        value_parser = parse_descriptor
    )]
    pub descriptors: Vec<Descriptor>,
    /// Hits to charge (request hits_addend; above 4294967295, the request field's
    /// maximum, each descriptor's hits_addend); 0 asks without charging (descriptor
    /// hits_addend 0, where the server supports it)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub hits: u64,
    /// Connect with TLS (implied by https:// and by --ca, --cert, --server-name)
    #[arg(long)]
    pub tls: bool,
    /// CA certificates that the server's certificate must chain to (PEM) [default: the
    /// Mozilla roots]
    #[arg(long, value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// Client certificate chain for mutual TLS (PEM)
    #[arg(long, value_name = "PATH", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Client private key for mutual TLS (PEM)
    #[arg(long, value_name = "PATH", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Name to verify the server's certificate against (and send as SNI) [default: the
    /// host of --addr]
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Print the response as JSON (proto3 JSON field names) instead of a table
    #[arg(long)]
    pub json: bool,
    /// Deadline for connecting and for the call
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_timeout)]
    pub timeout: std::time::Duration,
}

pub(super) fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    super::parse_duration("--timeout", s).map_err(|e| e.message)
}
