//! The arguments of `sluice top` (the command is `cli::top`, the request `client::top`): which
//! domain, how many descriptors, in what order, how to print them, and the setting it shares
//! with `serve` (the admin listener's address, which it asks).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::ADMIN_ADDR;
use super::declare::settings;
use super::query::parse_timeout;

#[derive(Debug, Args)]
pub struct TopArgs {
    /// The domain whose heavy hitters to list
    #[arg(long)]
    pub domain: String,
    /// How many descriptors to list (1 to 1000)
    #[arg(short = 'n', long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub n: u16,
    /// List the heaviest by hits, or by denials
    #[arg(long, value_enum, default_value_t = TopBy::Hits)]
    pub by: TopBy,
    /// Print the admin listener's JSON (`/top`) instead of a table
    #[arg(long)]
    pub json: bool,
    /// Deadline for connecting and for the answer
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// The order of `sluice top`'s list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TopBy {
    Hits,
    Denied,
}

impl TopBy {
    /// The name `/top` takes (`by=`).
    pub fn name(self) -> &'static str {
        match self {
            TopBy::Hits => "hits",
            TopBy::Denied => "denied",
        }
    }
}

settings! {
    /// What `sluice top` shares with `serve`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TopQuerySettings {
        /// `None`: the admin listener is off (`--admin-addr off`): nothing to ask.
        pub admin_addr: Option<SocketAddr> = shared(ADMIN_ADDR),
    }
}
