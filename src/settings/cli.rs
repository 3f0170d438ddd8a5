//! The command line: the subcommands, the arguments that are not settings (`check`'s paths,
//! `explain`'s request, `query`'s), each subcommand's settings (the flags of its
//! `settings!` table), and how the binary was invoked (as `ratelimit`, Envoy Gateway's
//! command, it serves). [`resolve`] turns a command line and an environment into what to
//! run.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use super::Settings;
use super::caps::MAX_CONFIG_FILE_BYTES;
use super::decl::Shape;
use super::declare::settings;
use super::env::Env;
use super::explain::{ExplainArgs, ExplainSettings};
use super::parse::SettingsError;
use super::query::QueryArgs;
use super::resolver::{Group, Resolver, table};
use super::rules::MERGE_DOMAINS;
use super::top_args::{TopArgs, TopQuerySettings};

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Envoy-compatible external rate limit service",
    long_about = "Envoy-compatible external rate limit service: a drop-in for envoyproxy/ratelimit \
                  with sliding windows, token and leaky buckets, GCRA, several limits per \
                  descriptor and lock-out penalties, on Redis or in memory."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the rate limit API (gRPC) and the HTTP endpoints.
    Serve,
    /// Validate rule files or directories; print every error.
    Check(CheckArgs),
    /// Which rule a descriptor matches and why, offline over rule files: each level of the
    /// walk, the rule, its limits, stats key and Redis keys.
    Explain(ExplainArgs),
    /// Ask a rate limit server (any RLS v3 server) one question; print its answer.
    /// Exit status: 0 OK, 1 OVER_LIMIT, 2 error.
    Query(Box<QueryArgs>),
    /// A domain's heavy hitters: the descriptors with the most hits (or denials) over the
    /// recent window, from a running sluice's admin listener.
    Top(TopArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Rule files or directories (searched recursively for *.yaml / *.yml).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

settings! {
    /// What `sluice check` shares with `serve`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct CheckSettings {
        pub merge_domains: bool = shared(MERGE_DOMAINS),
        pub max_config_file_bytes: u64 = shared(MAX_CONFIG_FILE_BYTES),
    }
}

/// What the command line asks for, resolved.
#[derive(Debug)]
pub enum Invocation {
    Serve(Box<Settings>),
    Check(CheckArgs, CheckSettings),
    Explain(ExplainArgs, ExplainSettings),
    Query(Box<QueryArgs>),
    Top(TopArgs, TopQuerySettings),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command line clap refused, or `--help` and `--version` (`clap::Error::exit` prints
    /// them with the exit status they call for).
    #[error("{0}")]
    CommandLine(#[from] clap::Error),
    /// A setting's value (flag or variable) that `command` cannot run with.
    #[error("{error}")]
    Setting {
        command: &'static str,
        error: SettingsError,
    },
}

impl Error {
    /// The settings error, if it is one.
    pub fn setting(&self) -> Option<&SettingsError> {
        match self {
            Error::Setting { error, .. } => Some(error),
            Error::CommandLine(_) => None,
        }
    }
}

/// The binary's command line (`argv[0]` first) under the environment `env`.
pub fn resolve<I, S>(argv: I, env: Env<'_>) -> Result<Invocation, Error>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let argv = invocation(argv.into_iter().map(Into::into).collect());
    let matches = command().try_get_matches_from(argv)?;
    let Cli { command } = Cli::from_arg_matches(&matches)?;
    let name = match &command {
        Command::Serve => "serve",
        Command::Check(_) => "check",
        Command::Explain(_) => "explain",
        Command::Query(_) => "query",
        Command::Top(_) => "top",
    };
    let sub = matches
        .subcommand_matches(name)
        .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingSubcommand))?;
    let r = Resolver::new(sub, env);
    let resolved = match command {
        Command::Serve => Settings::from_command_line(&r).map(|s| Invocation::Serve(Box::new(s))),
        Command::Check(a) => CheckSettings::from_resolver(&r).map(|s| Invocation::Check(a, s)),
        Command::Explain(a) => {
            ExplainSettings::from_resolver(&r).map(|s| Invocation::Explain(a, s))
        }
        Command::Query(q) => Ok(Invocation::Query(q)),
        Command::Top(a) => TopQuerySettings::from_resolver(&r).map(|s| Invocation::Top(a, s)),
    };
    resolved.map_err(|error| Error::Setting {
        command: name,
        error,
    })
}

/// `sluice serve ARGS` under `env` (`Settings::resolve`).
pub(super) fn serve<I, S>(args: I, env: Env<'_>) -> Result<Settings, Error>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let argv = ["sluice".into(), "serve".into()]
        .into_iter()
        .chain(args.into_iter().map(Into::into));
    match resolve(argv, env)? {
        Invocation::Serve(s) => Ok(*s),
        _ => unreachable!("`sluice serve` resolves to serve"),
    }
}

/// clap's command: the derived subcommands, with each one's settings as flags.
fn command() -> clap::Command {
    Cli::command()
        .mut_subcommand("serve", |c| c.args(flags::<Settings>(false)))
        // `check PATH…`: a switch takes a value only as `--merge-domains=false`, so a path
        // after it stays a path.
        .mut_subcommand("check", |c| c.args(flags::<CheckSettings>(true)))
        .mut_subcommand("explain", |c| c.args(flags::<ExplainSettings>(false)))
        .mut_subcommand("top", |c| c.args(flags::<TopQuerySettings>(false)))
}

fn flags<G: Group>(switch_requires_equals: bool) -> Vec<clap::Arg> {
    table::<G>()
        .iter()
        .filter_map(|d| {
            let arg = d.arg()?;
            Some(
                if switch_requires_equals && d.face().shape == Shape::Switch {
                    arg.require_equals(true)
                } else {
                    arg
                },
            )
        })
        .collect()
}

/// The command line as sluice parses it. Run as `ratelimit` (the image's `/bin/ratelimit`,
/// envoyproxy/ratelimit's binary path, which Envoy Gateway's deployment runs with no
/// arguments), sluice serves: their binary has no subcommands and reads its settings
/// from the environment. So does `sluice /bin/ratelimit`: their docker-compose files say
/// `command: /bin/ratelimit`, which replaces the image's arguments, not its entrypoint.
pub fn invocation(mut argv: Vec<OsString>) -> Vec<OsString> {
    let name = |a: Option<&OsString>| {
        a.and_then(|a| std::path::Path::new(a).file_name())
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned()
    };
    if argv.len() >= 2
        && name(argv.get(1)) == "ratelimit"
        && argv[1].to_str().is_some_and(|a| a.contains('/'))
    {
        argv[1] = "serve".into();
        return argv;
    }
    let invoked_as = name(argv.first());
    let first = argv.get(1).and_then(|a| a.to_str()).unwrap_or_default();
    let explicit = ["serve", "check", "help", "--help", "-h", "--version", "-V"].contains(&first);
    if invoked_as == "ratelimit" && !explicit {
        argv.insert(1, "serve".into());
    }
    argv
}
