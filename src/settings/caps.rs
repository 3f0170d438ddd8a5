//! Resource caps: the largest rule file read, the largest gRPC request message, the calls
//! worked on at once, and the memory store's live state. Each bounds what a file or a
//! client can make the process hold; each has a default far above normal use.

use clap::Args;

use super::Settings;
use super::parse::{SettingsError, err};
use crate::store::memory::DEFAULT_MAX_BYTES;

/// Default of `--max-config-file-bytes` (the same as `config::DEFAULT_MAX_FILE_BYTES`).
pub const DEFAULT_MAX_CONFIG_FILE_BYTES: u64 = 4 << 20;
/// Default of `--max-request-bytes` (gRPC's customary 4 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 << 20;
/// Smallest `--memory-max-bytes`: below it a shard could not hold a single sliding log.
const MIN_MEMORY_BYTES: u64 = 1 << 20;

#[derive(Debug, Args)]
pub struct CapArgs {
    /// Largest rule file read, in bytes; a larger file is a config error [default: 4194304]
    #[arg(long, value_name = "BYTES", env = "SLUICE_MAX_CONFIG_FILE_BYTES")]
    pub max_config_file_bytes: Option<u64>,
    /// Largest gRPC request message, in bytes; a larger one is refused with
    /// RESOURCE_EXHAUSTED [default: 4194304]
    #[arg(long, value_name = "BYTES", env = "SLUICE_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Ceiling of the adaptive limit on ShouldRateLimit gRPC calls worked on at once, and of
    /// the calls waiting for one; past them a call is refused at once with
    /// RESOURCE_EXHAUSTED (0: no ceiling) [default: 1024]
    #[arg(long, value_name = "N", env = "SLUICE_MAX_IN_FLIGHT")]
    pub max_in_flight: Option<usize>,
    /// Memory store: most bytes of limit state held; when full, the entries closest to
    /// empty make room (see the README) [default: 268435456]
    #[arg(long, value_name = "BYTES", env = "SLUICE_MEMORY_MAX_BYTES")]
    pub memory_max_bytes: Option<u64>,
}

/// The resolved caps that are not request bounds (`max_request_bytes` lives with those, in
/// `RequestLimits`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caps {
    pub max_config_file_bytes: u64,
    pub memory_max_bytes: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_config_file_bytes: DEFAULT_MAX_CONFIG_FILE_BYTES,
            memory_max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

pub(super) fn resolve(args: &CapArgs, s: &mut Settings) -> Result<(), SettingsError> {
    if let Some(n) = args.max_config_file_bytes {
        if n == 0 {
            return Err(err("--max-config-file-bytes", "must be at least 1"));
        }
        s.caps.max_config_file_bytes = n;
    }
    if let Some(n) = args.max_request_bytes {
        if n == 0 {
            return Err(err("--max-request-bytes", "must be at least 1"));
        }
        s.decision.limits.max_request_bytes = n;
    }
    if let Some(n) = args.max_in_flight {
        s.decision.limits.max_in_flight = n;
    }
    if let Some(n) = args.memory_max_bytes {
        if n < MIN_MEMORY_BYTES {
            return Err(err(
                "--memory-max-bytes",
                format!("must be at least {MIN_MEMORY_BYTES}"),
            ));
        }
        s.caps.memory_max_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    Ok(())
}
