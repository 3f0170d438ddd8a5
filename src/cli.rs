//! The one-shot commands of the binary: `sluice check`, `sluice explain`, `sluice query` and
//! `sluice top`.
//! Each takes its parsed arguments, prints its answer (stdout) or its error (stderr) and
//! returns the process's exit status, so `main.rs` only dispatches. (`serve` stays in
//! `main.rs`: it is the process itself — allocator, logging, runtime, signals.)
//!
//! The work is done elsewhere (`config` loads, `explain` explains, `client` asks); the
//! settings each command shares with `serve` (`--merge-domains`, `--config`,
//! `--cache-key-prefix`, with their variables) come resolved from `settings`, as `serve`'s
//! do. This module runs the command and maps its result to an exit code.

use crate::config::{ConfigError, LoadOptions, RateLimitConfig};
use crate::explain::{self, KeyLayout};
use crate::settings::{
    CheckArgs, CheckSettings, ExplainArgs, ExplainSettings, QueryArgs, TopArgs, TopQuerySettings,
};
use crate::store::redis::DEFAULT_KEY_PREFIX;

/// Success.
const OK: u8 = 0;
/// The rules do not load (check, explain), or the answer is OVER_LIMIT (query).
const FAILURE: u8 = 1;
/// A bad argument or setting (check, explain, query), or a query that got no answer.
pub const USAGE: u8 = 2;

/// `sluice check`: "all rate limit configs ok" and 0 (after any warnings), or every error
/// and 1.
pub fn check(args: &CheckArgs, settings: &CheckSettings) -> u8 {
    let opts = LoadOptions {
        max_file_bytes: settings.max_config_file_bytes,
        merge_domains: settings.merge_domains,
        ..LoadOptions::default()
    };
    match RateLimitConfig::load(&args.paths, &opts) {
        Ok(config) => {
            // What loads but has no effect: said, and the files still pass.
            print_located(config.warnings(), "warning: ");
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
pub fn explain(args: &ExplainArgs, settings: &ExplainSettings) -> u8 {
    let prefix = settings
        .cache_key_prefix
        .clone()
        .unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned());
    let opts = LoadOptions {
        merge_domains: settings.merge_domains,
        sanitize_metric_dots: settings.sanitize_metric_dots,
        ..LoadOptions::default()
    };
    let config = match RateLimitConfig::load(&settings.config_paths, &opts) {
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
    let answer = block_on("query", crate::client::query(args));
    print_answer("query", answer, |r| {
        (if args.json { r.json() } else { r.table() }, r.exit_code())
    })
}

/// `sluice top`: the heavy hitters of a domain, from the admin listener at `--admin-addr`;
/// 0 with the list, 2 when it cannot be had (connection, the listener's refusal).
pub fn top(args: &TopArgs, settings: &TopQuerySettings) -> u8 {
    let Some(admin) = settings.admin_addr else {
        eprintln!("sluice top: --admin-addr is off: give the address of sluice's admin listener");
        return USAGE;
    };
    let answer = block_on("top", crate::client::top(admin, args));
    print_answer("top", answer, |r| {
        (if args.json { r.json() } else { r.table() }, OK)
    })
}

/// Run `work` on a current-thread runtime; `None`, said on stderr, when none can start.
fn block_on<F: std::future::Future>(command: &str, work: F) -> Option<F::Output> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => Some(r.block_on(work)),
        Err(e) => {
            eprintln!("sluice {command}: starting the async runtime: {e}");
            None
        }
    }
}

/// A client command's answer on stdout (the text and exit status `shown` makes of it), or
/// its error on stderr and [`USAGE`].
fn print_answer<R>(
    command: &str,
    answer: Option<Result<R, crate::client::ClientError>>,
    shown: impl FnOnce(&R) -> (String, u8),
) -> u8 {
    match answer {
        None => USAGE,
        Some(Ok(r)) => {
            let (text, status) = shown(&r);
            print!("{text}");
            status
        }
        Some(Err(e)) => {
            eprintln!("sluice {command}: {e}");
            USAGE
        }
    }
}

/// Every error of every file, one per line (exact envoyproxy/ratelimit messages), each
/// followed by its location when known.
fn print_config_errors(errors: &[ConfigError]) {
    print_located(errors, "");
}

/// Each of `errors` after `prefix`, followed by its location when known.
fn print_located(errors: &[ConfigError], prefix: &str) {
    for e in errors {
        println!("{prefix}{e}");
        if let (Some(path), Some(line)) = (&e.path, e.line) {
            match e.column {
                Some(col) => println!("  --> {}:{line}:{col}", path.display()),
                None => println!("  --> {}:{line}", path.display()),
            }
        }
    }
}
