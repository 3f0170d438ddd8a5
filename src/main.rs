//! The `sluice` binary: `serve`, `check`, `explain` and `query`. Everything else lives in the
//! library.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use sluice::config::{LoadOptions, RateLimitConfig};
use sluice::explain::{self, KeyLayout};
use sluice::server::{self, Listeners};
use sluice::settings::{
    CheckArgs, Cli, Command, ExplainArgs, LogFormat, QueryArgs, Settings, invocation, parse_bool,
};
use sluice::store::redis::{DEFAULT_KEY_PREFIX, check_prefix};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

// The request path allocates many small, short-lived buffers (HTTP/2 frames, protobuf
// messages); glibc malloc spent ~15% of server CPU on them in profiles, mimalloc far less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse_from(invocation(std::env::args_os().collect()));
    match cli.command {
        Command::Check(args) => check(&args),
        Command::Explain(args) => explain(&args),
        Command::Query(args) => query(&args),
        Command::Serve(args) => match serve(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

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
fn print_config_errors(errors: &[sluice::config::ConfigError]) {
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

/// `sluice check`: "all rate limit configs ok", or every error.
fn check(args: &CheckArgs) -> ExitCode {
    let opts = LoadOptions {
        max_file_bytes: args.max_config_file_bytes,
        ..merge_domains(args.merge_domains)
    };
    match RateLimitConfig::load(&args.paths, &opts) {
        Ok(_) => {
            println!("all rate limit configs ok");
            ExitCode::SUCCESS
        }
        Err(errors) => {
            print_config_errors(&errors);
            ExitCode::FAILURE
        }
    }
}

/// `sluice explain`: exit 0 with the explanation, 1 when the rules do not load (printed as
/// `check` prints them), 2 for a bad argument.
fn explain(args: &ExplainArgs) -> ExitCode {
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
        return ExitCode::from(2);
    }
    let mut descriptors = Vec::with_capacity(args.descriptor.len());
    for d in &args.descriptor {
        match explain::parse_descriptor(d) {
            Ok(entries) => descriptors.push(entries),
            Err(e) => {
                eprintln!("sluice: --descriptor {d:?}: {e}");
                return ExitCode::from(2);
            }
        }
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
            return ExitCode::FAILURE;
        }
    };
    let keys = KeyLayout {
        prefix: &prefix,
        store: None,
    };
    let e = explain::explain(&config, &args.domain, &descriptors, keys);
    if args.json {
        match serde_json::to_string_pretty(&e) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("sluice: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", explain::render(&e));
    }
    ExitCode::SUCCESS
}

/// `sluice query`: the answer on stdout; exit 0 OK, 1 OVER_LIMIT, 2 error (on stderr).
fn query(args: &QueryArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice query: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(sluice::client::query(args)) {
        Ok(report) => {
            print!(
                "{}",
                if args.json {
                    report.json()
                } else {
                    report.table()
                }
            );
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("sluice query: {e}");
            ExitCode::from(2)
        }
    }
}

fn serve(args: &sluice::settings::ServeArgs) -> anyhow::Result<()> {
    let settings = Settings::from_env(args)?;
    init_logging(&settings);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = settings.worker_threads {
        builder.worker_threads(n);
    }
    let runtime = builder
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let listeners = Listeners::bind(&settings).await?;
        let shutdown = CancellationToken::new();
        tokio::spawn(wait_for_signal(shutdown.clone()));
        server::run(settings, listeners, shutdown).await?;
        Ok(())
    })
}

fn init_logging(settings: &Settings) {
    // RUST_LOG (when set) refines the level; sluice's own level otherwise.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,sluice={}", settings.log_level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match settings.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

/// Ctrl-C or SIGTERM starts a graceful shutdown.
async fn wait_for_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    shutdown.cancel();
}
