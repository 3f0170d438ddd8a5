//! Resolution: each setting's value from its flag, else its `SLUICE_*` variable, else
//! envoyproxy/ratelimit's variables, else its default. The environment is read here (and by
//! the mappings of the reference's variables this calls), through the lookup the caller passes: the
//! process's in the binary, a map in tests, so `SLUICE_*` and the reference's variables resolve the
//! same way in both.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgMatches;
use clap::parser::ValueSource;

use super::decl::{Decl, Setting, sluice_var};
use super::env::{Env, var};
use super::parse::{SettingsError, err};

/// Where a value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The command line.
    Flag,
    /// sluice's `SLUICE_*` variable.
    Var,
    /// envoyproxy/ratelimit's variables.
    RefVar,
    /// The declared default.
    Default,
}

/// A value with where it came from and the name it was set under (`--redis-url`,
/// `SLUICE_REDIS_URL`, `REDIS_URL`), for settings whose meaning depends on it (their URL
/// forms, their TLS files counting only with their TLS switch).
#[derive(Clone, Debug, PartialEq)]
pub struct Given<T> {
    pub value: T,
    pub source: Source,
    pub name: String,
}

impl<T> Given<T> {
    /// Set on sluice's side: its flag or its `SLUICE_*` variable.
    pub fn by_sluice(&self) -> bool {
        matches!(self.source, Source::Flag | Source::Var)
    }
}

/// A type a setting can hold.
pub trait Value: Clone + Send + Sync + 'static {
    /// The value of a setting given nowhere that declares no default (`None`: it must
    /// declare one).
    fn unset() -> Option<Self> {
        None
    }

    /// The values of a repeated flag, as one.
    fn join(values: Vec<Self>) -> Option<Self> {
        values.into_iter().last()
    }
}

impl<T: Clone + Send + Sync + 'static> Value for Option<T> {
    fn unset() -> Option<Self> {
        Some(None)
    }
}

impl<T: Clone + Send + Sync + 'static> Value for Vec<T> {
    fn unset() -> Option<Self> {
        Some(Vec::new())
    }

    fn join(values: Vec<Self>) -> Option<Self> {
        Some(values.into_iter().flatten().collect())
    }
}

macro_rules! plain_values {
    ($($t:ty),*) => { $(impl Value for $t {})* };
}
plain_values!(
    bool, u32, u64, usize, f32, f64, String, PathBuf, Duration, SocketAddr
);

/// The type of a `settings!` field: a [`Value`], or a [`Given`] one.
pub trait Field: Sized {
    type Value: Value;
    fn resolve(r: &Resolver<'_>, d: &'static Setting<Self::Value>) -> Result<Self, SettingsError>;
}

impl<T: Value> Field for T {
    type Value = T;
    fn resolve(r: &Resolver<'_>, d: &'static Setting<T>) -> Result<T, SettingsError> {
        r.get(d)
    }
}

impl<T: Value> Field for Given<T> {
    type Value = T;
    fn resolve(r: &Resolver<'_>, d: &'static Setting<T>) -> Result<Given<T>, SettingsError> {
        r.given(d)
    }
}

/// Types `settings!` into a declaration of the field's type (`declare.rs`).
pub const fn decl<F: Field>(d: &'static Setting<F::Value>) -> &'static Setting<F::Value> {
    d
}

/// A struct declared with `settings!`: its settings, and itself resolved.
pub trait Group: Sized {
    /// Every setting it reads, in order (nested groups included).
    fn table(out: &mut Vec<&'static dyn Decl>);
    fn from_resolver(r: &Resolver<'_>) -> Result<Self, SettingsError>;
}

/// The settings `G` reads.
pub fn table<G: Group>() -> Vec<&'static dyn Decl> {
    let mut out = Vec::new();
    G::table(&mut out);
    out
}

/// `G` with every setting at its default (the `Default` of `settings!` structs).
pub fn defaults<G: Group>() -> G {
    G::from_resolver(&Resolver::defaults())
        .unwrap_or_else(|e| panic!("a declared default does not resolve: {e}"))
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// The command line as clap parsed it, and the environment.
pub struct Resolver<'a> {
    matches: Option<&'a ArgMatches>,
    env: Env<'a>,
    notes: RefCell<Vec<String>>,
}

impl<'a> Resolver<'a> {
    pub fn new(matches: &'a ArgMatches, env: Env<'a>) -> Resolver<'a> {
        Resolver {
            matches: Some(matches),
            env,
            notes: RefCell::default(),
        }
    }

    /// No command line and an empty environment.
    pub fn defaults() -> Resolver<'static> {
        Resolver {
            matches: None,
            env: &no_env,
            notes: RefCell::default(),
        }
    }

    /// The environment, for what checks the reference's variables beyond one setting (the audit).
    pub fn env(&self) -> Env<'a> {
        self.env
    }

    /// A note logged once at startup (a variable ignored, and why).
    pub fn note(&self, note: String) {
        self.notes.borrow_mut().push(note);
    }

    pub fn take_notes(&self) -> Vec<String> {
        self.notes.take()
    }

    pub fn get<T: Value>(&self, d: &Setting<T>) -> Result<T, SettingsError> {
        self.given(d).map(|g| g.value)
    }

    /// The value with where it came from: the flag, else the `SLUICE_*` variable, else
    /// the reference's variables, else the default.
    pub fn given<T: Value>(&self, d: &Setting<T>) -> Result<Given<T>, SettingsError> {
        if let Some(g) = self.by_flag(d)? {
            return Ok(g);
        }
        if let Some(g) = self.by_sluice_var(d)? {
            return Ok(g);
        }
        if let Some(g) = self.by_ref_vars(d)? {
            return Ok(g);
        }
        self.by_default(d)
    }

    /// The parsed command line and the setting's flag, when there are both.
    fn on_command_line<T: Value>(&self, d: &Setting<T>) -> Option<(&ArgMatches, &'static str)> {
        self.matches.zip(d.face.flag)
    }

    fn by_flag<T: Value>(&self, d: &Setting<T>) -> Result<Option<Given<T>>, SettingsError> {
        let Some((m, flag)) = self.on_command_line(d) else {
            return Ok(None);
        };
        if m.value_source(flag) != Some(ValueSource::CommandLine) {
            return Ok(None);
        }
        // clap ran the setting's parser on each value.
        let values: Vec<T> = m
            .try_get_many::<T>(flag)
            .ok()
            .flatten()
            .map(|v| v.cloned().collect())
            .unwrap_or_default();
        let name = format!("--{flag}");
        let value = T::join(values).ok_or_else(|| err(&name, "no value"))?;
        Ok(Some(Given::at(value, Source::Flag, name)))
    }

    fn by_sluice_var<T: Value>(&self, d: &Setting<T>) -> Result<Option<Given<T>>, SettingsError> {
        let Some(flag) = d.face.flag else {
            return Ok(None);
        };
        let name = sluice_var(flag);
        let Some(v) = var(self.env, &name) else {
            return Ok(None);
        };
        let value = (d.parse)(&v).map_err(|m| err(&name, m))?;
        Ok(Some(Given::at(value, Source::Var, name)))
    }

    fn by_ref_vars<T: Value>(&self, d: &Setting<T>) -> Result<Option<Given<T>>, SettingsError> {
        let Some(first) = d.face.ref_vars().first().map(|t| t.name) else {
            return Ok(None);
        };
        let value = match d.map {
            Some(map) => map(self.env)?,
            None => match var(self.env, first) {
                Some(v) => Some((d.parse)(&v).map_err(|m| err(first, m))?),
                None => None,
            },
        };
        Ok(value.map(|v| Given::at(v, Source::RefVar, first.to_owned())))
    }

    fn by_default<T: Value>(&self, d: &Setting<T>) -> Result<Given<T>, SettingsError> {
        let name = match (d.face.flag, d.face.ref_vars().first()) {
            (Some(flag), _) => format!("--{flag}"),
            (None, Some(t)) => t.name.to_owned(),
            (None, None) => String::new(),
        };
        // clap parsed the default with the same parser; without a command line, parse it here.
        let parsed = self
            .on_command_line(d)
            .and_then(|(m, flag)| m.try_get_one::<T>(flag).ok().flatten().cloned());
        let value = match (parsed, d.face.default) {
            (Some(v), _) => v,
            (None, Some(default)) => (d.parse)(default).map_err(|m| err(&name, m))?,
            (None, None) => T::unset().ok_or_else(|| err(&name, "declares no default"))?,
        };
        Ok(Given::at(value, Source::Default, name))
    }
}

impl<T> Given<T> {
    fn at(value: T, source: Source, name: String) -> Given<T> {
        Given {
            value,
            source,
            name,
        }
    }
}
