//! The settings audit: what sluice does with each environment variable envoyproxy/ratelimit's
//! settings read.
//!
//! Every name they read (`tests/data/envoyproxy-ratelimit-settings.txt`, from their
//! `src/settings/settings.go`) is in exactly one of three lists:
//! - honoured: declared by a setting that reads it with their meaning (the table of settings,
//!   `settings!` structs; a value sluice cannot honour, such as `BACKEND_TYPE=memcache`, is
//!   refused by that setting's parser); the list is the declarations' (`honoured()`);
//! - [`REFUSED`]: startup stops, naming the variable and the reason, when it is set to a
//!   value that would change behaviour;
//! - [`NO_EFFECT`]: sluice already behaves one fixed way; when set, a note saying so is
//!   logged once at startup.
//!
//! The lists are what the code acts on, so they cannot drift from it: `refuse` and
//! `note` walk them at resolution, the tests (`tests.rs`) set every honoured name to its
//! declared probe value and check that the resolved settings change, hold every list to the
//! data file, and render the reference's table of the reference's variables from them (`readme.rs`).

mod refused;

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

/// The reference's variables the settings declare, each with what it does here and its probe, in the
/// order of the table.
#[cfg(test)]
fn honoured() -> Vec<(&'static super::decl::RefVar, String)> {
    let table = super::resolver::table::<super::Settings>();
    let mut out = Vec::new();
    for d in table {
        let f = d.face();
        for t in f.ref_vars().iter().filter(|t| !t.library) {
            let help = super::readme::lower_first(f.help);
            // The default, unless it goes without saying (off, false, none).
            let default = match super::readme::shown_default(f) {
                Some(v) if !matches!(&*v, "false" | "none" | "off") => format!(", {v}"),
                _ => String::new(),
            };
            let does = match (t.does, f.flag) {
                (Some(does), _) => does.to_owned(),
                (None, Some(flag)) => format!("{help} (`--{flag}`){default}"),
                (None, None) => format!("{help}{default}"),
            };
            out.push((t, does));
        }
    }
    out
}

#[cfg(test)]
mod readme;
#[cfg(test)]
mod tests;
