//! Resource caps: the largest rule file read and the memory store's live state (the request
//! bounds, the gRPC message size and the calls worked on at once are `RequestLimits`). Each
//! bounds what a file or a client can make the process hold; each has a default far above
//! normal use.

use super::decl::Setting;
use super::declare::settings;
use super::resolver::defaults;
use super::values::{number, positive};
use crate::store::memory::MemoryOptions;

/// `--max-config-file-bytes`, which `sluice check` reads too (the same default as
/// `config::DEFAULT_MAX_FILE_BYTES`).
pub(super) static MAX_CONFIG_FILE_BYTES: Setting<u64> =
    Setting::value("max-config-file-bytes", "BYTES", positive)
        .default("4194304")
        .shown_default("4 MiB")
        .help(
            "Largest rule file read, in bytes (also by `sluice check`); a larger file is a \
             config error",
        );

/// Smallest `--memory-max-bytes`: below it a shard could not hold a single sliding log.
const MIN_MEMORY_BYTES: usize = 1 << 20;

fn memory_bytes(s: &str) -> Result<usize, String> {
    let n: u64 = number(s)?;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n < MIN_MEMORY_BYTES {
        return Err(format!("must be at least {MIN_MEMORY_BYTES}"));
    }
    Ok(n)
}

settings! {
    /// The resolved caps that are not request bounds.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Caps {
        pub max_config_file_bytes: u64 = shared(MAX_CONFIG_FILE_BYTES),
        /// Memory store: most bytes of limit state held (at least 1 MiB); when full, the
        /// entries closest to empty make room
        pub memory_max_bytes: usize = setting(
            Setting::value("memory-max-bytes", "BYTES", memory_bytes)
                .default("268435456")
                .shown_default("256 MiB")
                .see("[Caps and limits](caps-and-limits.md)")
        ),
    }
}

/// The memory store's defaults are the declaration's (`--memory-max-bytes`) and its own tuning.
impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            shards: 64,
            min_sweep_len: 1024,
            max_bytes: defaults::<Caps>().memory_max_bytes,
        }
    }
}
