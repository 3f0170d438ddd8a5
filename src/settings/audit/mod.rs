//! The settings audit: what sluice does with each environment variable envoyproxy/ratelimit's
//! settings read.
//!
//! Every name they read (`tests/data/envoyproxy-ratelimit-settings.txt`, from their
//! `src/settings/settings.go`) is in exactly one of three lists:
//! - [`HONOURED`]: read by the resolution code with their meaning (a value sluice cannot
//!   honour, such as `BACKEND_TYPE=memcache`, is refused where the variable is read, and the
//!   entry says so);
//! - [`REFUSED`]: startup stops, naming the variable and the reason, when it is set to a
//!   value that would change behaviour;
//! - [`NO_EFFECT`]: sluice already behaves one fixed way; when set, a note saying so is
//!   logged once at startup.
//!
//! The lists are what the code acts on, so they cannot drift from it: [`refuse`] and
//! [`note`] walk them at resolution, the tests (`tests.rs`) check every honoured name
//! against `Settings::resolve` and every list against the data file, and the README's table
//! of their variables is rendered from them (`readme.rs`).

mod honoured;
mod refused;

pub use honoured::HONOURED;
pub use refused::{NO_EFFECT, REFUSED};

use super::env::{Env, var};
use super::parse::{SettingsError, err, parse_bool};

/// A refused variable: set to anything but its inert value, startup stops with `why`.
#[derive(Clone, Copy, Debug)]
pub struct Refusal {
    pub name: &'static str,
    pub inert: Inert,
    pub why: &'static str,
}

/// The values of a refused variable that change nothing (their default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inert {
    /// Any value is refused.
    Nothing,
    /// A boolean false (`false`, `0`, `f` …, as Go's `strconv.ParseBool`) is accepted.
    False,
    /// `0` (their "disabled") is accepted.
    Zero,
}

impl Inert {
    fn accepts(self, value: &str) -> bool {
        match self {
            Inert::Nothing => false,
            Inert::False => matches!(parse_bool("", value), Ok(false)),
            Inert::Zero => value.trim().parse::<i64>() == Ok(0),
        }
    }
}

/// Stop at the first refused variable set to a value that would change behaviour.
pub(super) fn refuse(env: Env<'_>) -> Result<(), SettingsError> {
    for r in REFUSED {
        if var(env, r.name).is_some_and(|v| !r.inert.accepts(&v)) {
            return Err(err(r.name, r.why));
        }
    }
    Ok(())
}

/// One note for each no-effect variable that is set.
pub(super) fn note(env: Env<'_>, notes: &mut Vec<String>) {
    for (name, why) in NO_EFFECT {
        if let Some(v) = var(env, name) {
            notes.push(format!("{name}={v} has no effect here: {why}"));
        }
    }
}

/// A list entry that stands for a family of names (`DOG_STATSD_MOGRIFIER_*`).
pub fn is_pattern(name: &str) -> bool {
    name.ends_with('*')
}

#[cfg(test)]
mod probes;
#[cfg(test)]
mod readme;
#[cfg(test)]
mod tests;
