//! The `sluice` binary: dispatches `check`, `explain`, `query` and `top` to the library (`cli`), and
//! runs `serve`: the process around `server::run` (allocator, logging, runtime, signals).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use sluice::cli;
use sluice::limit::SystemClock;
use sluice::server::{self, Listeners};
use sluice::settings::{self, Error, Invocation, LogFormat, Settings};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

// The request path allocates many small, short-lived buffers (HTTP/2 frames, protobuf
// messages); glibc malloc spent ~15% of server CPU on them in profiles, mimalloc far less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // The one place the process's environment reaches the settings.
    match settings::resolve(std::env::args_os(), &settings::process_env) {
        Ok(Invocation::Check(args, s)) => ExitCode::from(cli::check(&args, &s)),
        Ok(Invocation::Explain(args, s)) => ExitCode::from(cli::explain(&args, &s)),
        Ok(Invocation::Query(args)) => ExitCode::from(cli::query(&args)),
        Ok(Invocation::Top(args, s)) => ExitCode::from(cli::top(&args, &s)),
        Ok(Invocation::Serve(settings)) => match serve(*settings) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice: {e:#}");
                ExitCode::FAILURE
            }
        },
        Err(Error::CommandLine(e)) => e.exit(),
        Err(Error::Setting { command, error }) => {
            eprintln!("sluice: {error}");
            // `serve` fails as any startup error does; the one-shot commands call a bad
            // setting a usage error, as a bad argument.
            ExitCode::from(if command == "serve" { 1 } else { cli::USAGE })
        }
    }
}

fn serve(settings: Settings) -> anyhow::Result<()> {
    init_logging(&settings);
    let runtime = runtime(settings.worker_threads)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let listeners = Listeners::bind(&settings).await?;
        let shutdown = CancellationToken::new();
        tokio::spawn(wait_for_signal(shutdown.clone()));
        server::run(settings, listeners, shutdown, Arc::new(SystemClock)).await?;
        Ok(())
    })
}

/// The runtime for `threads` workers (unset: one per CPU available to the process, as
/// tokio counts them: affinity masks and cgroup quotas included). One thread gets tokio's
/// current-thread scheduler, on which every task (connections, their streams, the store's
/// connection drivers) runs on the thread that `block_on`s: no work-stealing queues, no
/// cross-thread wake-ups, no idle workers to notify on each spawn. With one CPU that is all
/// a multi-thread runtime could do anyway; measured pinned to one CPU (`scripts/cpu-compare.sh`,
/// BENCHMARKS.md "CPU per decision"), it costs less per call.
fn runtime(threads: Option<usize>) -> tokio::runtime::Builder {
    let threads =
        threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads == 1 {
        return tokio::runtime::Builder::new_current_thread();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads);
    builder
}

fn init_logging(settings: &Settings) {
    // RUST_LOG (when set) refines the level; sluice's own level otherwise.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,sluice={}", settings.log_level)));
    let colour = settings::log_colour(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match settings.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

/// Ctrl-C or SIGTERM starts a graceful shutdown; a second one ends the process at once.
///
/// The graceful shutdown keeps serving for `--shutdown-delay` (5 s by default, so load
/// balancers notice the failing health checks first): right for an orchestrator's SIGTERM,
/// slow for someone at a terminal, who presses Ctrl-C again, as with most servers.
async fn wait_for_signal(shutdown: CancellationToken) {
    let first = next_signal().await;
    shutdown.cancel();
    if first.is_err() {
        return;
    }
    if next_signal().await.is_ok() {
        tracing::warn!("second signal: exiting now, without the shutdown delay and drain");
        std::process::exit(130);
    }
}

/// The next Ctrl-C or SIGTERM (an error when no signal can be listened for).
async fn next_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await
}
