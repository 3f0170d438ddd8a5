//! The one-shot commands of the binary: `sluice check`, `sluice explain` and `sluice query`.
//! Each takes its parsed arguments, prints its answer (stdout) or its error (stderr) and
//! returns the process's exit status, so `main.rs` only dispatches. (`serve` stays in
//! `main.rs`: it is the process itself — allocator, logging, runtime, signals.)
//!
//! The work is done elsewhere (`config` loads, `explain` explains, `client` asks); this
//! module resolves what the command line leaves to the environment (`MERGE_DOMAIN_CONFIG`,
//! `CACHE_KEY_PREFIX`, as envoyproxy/ratelimit's names) and maps results to exit codes.

use crate::config::{ConfigError, LoadOptions, RateLimitConfig};
use crate::explain::{self, KeyLayout};
use crate::settings::{CheckArgs, ExplainArgs, QueryArgs, parse_bool};
use crate::store::redis::{DEFAULT_KEY_PREFIX, check_prefix};

/// Success.
const OK: u8 = 0;
/// The rules do not load (check, explain), or the answer is OVER_LIMIT (query).
const FAILURE: u8 = 1;
/// A bad argument (explain, query), or a query that got no answer.
const USAGE: u8 = 2;

/// `sluice check`: "all rate limit configs ok" and 0, or every error and 1.
pub fn check(args: &CheckArgs) -> u8 {
    let opts = LoadOptions {
        max_file_bytes: args.max_config_file_bytes,
        ..merge_domains(args.merge_domains)
    };
    match RateLimitConfig::load(&args.paths, &opts) {
        Ok(_) => {
            println!("all rate limit configs ok");
            OK
        }
        Err(errors) => {
            print_config_errors(&errors);
            FAILURE
        }
    }
}

/// `sluice explain`: 0 with the explanation, 1 when the rules do not load (printed as
/// `check` prints them), 2 for a bad argument.
pub fn explain(args: &ExplainArgs) -> u8 {
    let prefix = args
        .cache_key_prefix
        .clone()
        .or_else(|| {
            std::env::var("CACHE_KEY_PREFIX")
                .ok()
                .filter(|p| !p.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned());
    if let Err(e) = check_prefix(&prefix) {
        eprintln!("sluice: {e}");
        return USAGE;
    }
    let paths = if args.config.is_empty() {
        vec!["config".into()]
    } else {
        args.config.clone()
    };
    let config = match RateLimitConfig::load(&paths, &merge_domains(args.merge_domains)) {
        Ok(c) => c,
        Err(errors) => {
            print_config_errors(&errors);
            return FAILURE;
        }
    };
    let keys = KeyLayout {
        prefix: &prefix,
        store: None,
    };
    let descriptors: Vec<_> = args
        .descriptor
        .iter()
        .chain(&args.bucket)
        .cloned()
        .collect();
    let e = explain::explain(&config, &args.domain, &descriptors, keys);
    if args.json {
        match serde_json::to_string_pretty(&e) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("sluice: {err}");
                return FAILURE;
            }
        }
    } else {
        print!("{}", explain::render(&e));
    }
    OK
}

/// `sluice query`: the answer on stdout; 0 OK, 1 OVER_LIMIT, 2 error (on stderr).
pub fn query(args: &QueryArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice query: starting the async runtime: {e}");
            return USAGE;
        }
    };
    match runtime.block_on(crate::client::query(args)) {
        Ok(report) => {
            print!(
                "{}",
                if args.json {
                    report.json()
                } else {
                    report.table()
                }
            );
            report.exit_code()
        }
        Err(e) => {
            eprintln!("sluice query: {e}");
            USAGE
        }
    }
}

/// `--merge-domains`, or envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`.
fn merge_domains(flag: bool) -> LoadOptions {
    let merge = flag
        || std::env::var("MERGE_DOMAIN_CONFIG")
            .is_ok_and(|v| parse_bool("MERGE_DOMAIN_CONFIG", &v).unwrap_or(false));
    LoadOptions {
        merge_domains: merge,
        ..LoadOptions::default()
    }
}

/// Every error of every file, one per line (exact envoyproxy/ratelimit messages), each
/// followed by its location when known.
fn print_config_errors(errors: &[ConfigError]) {
    for e in errors {
        println!("{e}");
        if let (Some(path), Some(line)) = (&e.path, e.line) {
            match e.column {
                Some(col) => println!("  --> {}:{line}:{col}", path.display()),
                None => println!("  --> {}:{line}", path.display()),
            }
        }
    }
}
