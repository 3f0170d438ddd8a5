//! What a setting is: its flag, its `SLUICE_*` variable (the flag's name, upper case), the
//! envoyproxy/ratelimit variables that also set it and how their values map, its default,
//! its parser and its help. One [`Setting`] is written once, as a field of a `settings!`
//! struct (`declare.rs`); clap's arguments, `--help`, the settings reference's tables and the audit of
//! their variables are all read from it.

#[cfg(test)]
use std::borrow::Cow;

use clap::{Arg, ArgAction};

use super::env::Env;
use super::parse::SettingsError;
pub use super::their::Their;

/// Most of their variables one setting combines (`RUNTIME_ROOT`, `…_SUBDIRECTORY`,
/// `…_APPDIRECTORY`).
const MAX_THEIRS: usize = 4;

/// Turns their variables into a setting's value; `None` when none of them is set.
pub type Map<T> = fn(Env<'_>) -> Result<Option<T>, SettingsError>;

/// How the value is given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `--flag VALUE`.
    Value,
    /// `--flag` alone means true; `--flag false` (or `=false`) turns it off.
    Switch,
    /// `--flag A --flag B` (each value may be a list).
    Repeated,
}

/// One setting. `T` is the type its field holds; `parse` reads the flag, the `SLUICE_*`
/// variable, the default and (unless `map` says otherwise) their variable.
pub struct Setting<T> {
    pub(super) flag: Option<&'static str>,
    pub(super) value_name: &'static str,
    pub(super) shape: Shape,
    pub(super) default: Option<&'static str>,
    pub(super) parse: fn(&str) -> Result<T, String>,
    pub(super) values: &'static [&'static str],
    theirs: [Their; MAX_THEIRS],
    count: usize,
    pub(super) map: Option<Map<T>>,
    pub(super) help: &'static str,
    /// The reference's cells, where they say more than the rest (test-only: the reference's
    /// tables are rendered by a test).
    #[cfg(test)]
    readme: Option<&'static str>,
    #[cfg(test)]
    shown_default: Option<&'static str>,
    #[cfg(test)]
    shown_theirs: Option<&'static str>,
}

impl<T> Setting<T> {
    const fn new(
        flag: Option<&'static str>,
        shape: Shape,
        parse: fn(&str) -> Result<T, String>,
    ) -> Self {
        Setting {
            flag,
            value_name: "",
            shape,
            default: None,
            parse,
            values: &[],
            theirs: [Their::new("", ""); MAX_THEIRS],
            count: 0,
            map: None,
            help: "",
            #[cfg(test)]
            readme: None,
            #[cfg(test)]
            shown_default: None,
            #[cfg(test)]
            shown_theirs: None,
        }
    }

    /// `--flag VALUE` (and `SLUICE_FLAG`).
    pub const fn value(
        flag: &'static str,
        value_name: &'static str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Self {
        let mut s = Setting::new(Some(flag), Shape::Value, parse);
        s.value_name = value_name;
        s
    }

    /// `--flag VALUE`, repeatable; the values are joined.
    pub const fn repeated(
        flag: &'static str,
        value_name: &'static str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Self {
        let mut s = Setting::value(flag, value_name, parse);
        s.shape = Shape::Repeated;
        s
    }

    /// A setting only their variables set: no flag, no `SLUICE_*` variable.
    pub const fn theirs_only(parse: fn(&str) -> Result<T, String>) -> Self {
        Setting::new(None, Shape::Value, parse)
    }

    pub const fn default(mut self, value: &'static str) -> Self {
        self.default = Some(value);
        self
    }

    /// The values `parse` accepts, shown in `--help` and the settings reference.
    pub const fn values(mut self, values: &'static [&'static str]) -> Self {
        self.values = values;
        self
    }

    /// Their variable of the same meaning and syntax, read with `parse`.
    pub const fn same(self, their: Their) -> Self {
        self.their(their)
    }

    /// Their variables are combined by `map` (declare each with [`Setting::their`]).
    pub const fn map(mut self, map: Map<T>) -> Self {
        self.map = Some(map);
        self
    }

    /// One more variable of theirs this setting reads.
    pub const fn their(mut self, their: Their) -> Self {
        assert!(
            self.count < MAX_THEIRS,
            "more of their variables than MAX_THEIRS"
        );
        self.theirs[self.count] = their;
        self.count += 1;
        self
    }

    /// The `--help` text (a `settings!` field's doc comment).
    pub const fn help(mut self, text: &'static str) -> Self {
        self.help = text.trim_ascii();
        self
    }

    /// The reference's text, when it says more than `--help` (links to other pages).
    pub const fn readme(self, text: &'static str) -> Self {
        #[cfg(test)]
        return Setting {
            readme: Some(text),
            ..self
        };
        #[cfg(not(test))]
        {
            let _ = text;
            self
        }
    }

    /// The reference's default, when the parsed default does not say it well (`4 MiB`, `off`).
    pub const fn shown_default(self, text: &'static str) -> Self {
        #[cfg(test)]
        return Setting {
            shown_default: Some(text),
            ..self
        };
        #[cfg(not(test))]
        {
            let _ = text;
            self
        }
    }

    /// The reference's cell for their variables, when their names alone do not say how they map.
    pub const fn shown_theirs(self, text: &'static str) -> Self {
        #[cfg(test)]
        return Setting {
            shown_theirs: Some(text),
            ..self
        };
        #[cfg(not(test))]
        {
            let _ = text;
            self
        }
    }

    pub(super) fn their_vars(&self) -> &[Their] {
        &self.theirs[..self.count]
    }
}

impl Setting<bool> {
    /// `--flag` (true) or `--flag=false`; false unless given.
    pub const fn switch(flag: &'static str) -> Self {
        Setting::new(Some(flag), Shape::Switch, super::values::boolean).default("false")
    }
}

/// `--grpc-addr` → `SLUICE_GRPC_ADDR`.
pub fn sluice_var(flag: &str) -> String {
    format!("SLUICE_{}", flag.to_ascii_uppercase().replace('-', "_"))
}

/// The face of a [`Setting`] that does not depend on its type: what clap, `--help`, the
/// settings reference and the audit read.
pub trait Decl: Sync {
    /// The clap argument of the flag; `None` for a setting only their variables set.
    fn arg(&self) -> Option<Arg>;
    /// `--flag` alone means true.
    fn is_switch(&self) -> bool;
    /// The long flag, without dashes.
    #[cfg(test)]
    fn flag(&self) -> Option<&'static str>;
    /// Their variables it reads.
    #[cfg(test)]
    fn theirs(&self) -> &[Their];
    #[cfg(test)]
    fn help(&self) -> &'static str;
    /// The reference's meaning cell.
    #[cfg(test)]
    fn readme(&self) -> &'static str;
    /// The reference's default cell.
    #[cfg(test)]
    fn shown_default(&self) -> Option<Cow<'static, str>>;
    /// The reference's cell for their variables.
    #[cfg(test)]
    fn shown_theirs(&self) -> Option<Cow<'static, str>>;
    /// The declaration's own literals parse: its default and every listed value.
    #[cfg(test)]
    fn check(&self) -> Result<(), String>;
}

impl<T: Clone + Send + Sync + 'static> Decl for Setting<T> {
    fn arg(&self) -> Option<Arg> {
        let flag = self.flag?;
        let mut help = self.help.to_string();
        if !self.values.is_empty() {
            help.push_str(&format!(" [possible values: {}]", self.values.join(", ")));
        }
        help.push_str(&format!(" [env: {}]", sluice_var(flag)));
        if self.count > 0 {
            let names: Vec<_> = self.their_vars().iter().map(|t| t.name).collect();
            help.push_str(&format!(" [also: {}]", names.join(", ")));
        }
        let mut arg = Arg::new(flag)
            .long(flag)
            .help(help)
            .value_parser(self.parse);
        arg = match self.shape {
            Shape::Value => arg.action(ArgAction::Set).value_name(self.value_name),
            Shape::Repeated => arg.action(ArgAction::Append).value_name(self.value_name),
            Shape::Switch => arg
                .action(ArgAction::Set)
                .value_name("BOOL")
                .num_args(0..=1)
                .default_missing_value("true"),
        };
        if let Some(d) = self.default {
            arg = arg.default_value(d);
        }
        Some(arg)
    }

    fn is_switch(&self) -> bool {
        self.shape == Shape::Switch
    }

    #[cfg(test)]
    fn flag(&self) -> Option<&'static str> {
        self.flag
    }

    #[cfg(test)]
    fn theirs(&self) -> &[Their] {
        self.their_vars()
    }

    #[cfg(test)]
    fn help(&self) -> &'static str {
        self.help
    }

    #[cfg(test)]
    fn readme(&self) -> &'static str {
        self.readme.unwrap_or(self.help)
    }

    #[cfg(test)]
    fn shown_default(&self) -> Option<Cow<'static, str>> {
        if let Some(s) = self.shown_default {
            return Some(s.into());
        }
        let d = self.default?;
        // Booleans, numbers and durations as they are; anything else is a literal value.
        let plain = matches!(d, "true" | "false")
            || d.parse::<f64>().is_ok()
            || humantime::parse_duration(d).is_ok();
        Some(if plain {
            d.into()
        } else {
            format!("`{d}`").into()
        })
    }

    #[cfg(test)]
    fn shown_theirs(&self) -> Option<Cow<'static, str>> {
        if let Some(s) = self.shown_theirs {
            return Some(s.into());
        }
        let names: Vec<_> = self
            .their_vars()
            .iter()
            .map(|t| format!("`{}`", t.name))
            .collect();
        (!names.is_empty()).then(|| names.join(", ").into())
    }

    #[cfg(test)]
    fn check(&self) -> Result<(), String> {
        for v in self.default.iter().chain(self.values) {
            (self.parse)(v).map_err(|e| format!("{v}: {e}"))?;
        }
        if self.map.is_none() && self.count > 1 {
            return Err("several of their variables, and no `.map` to combine them".into());
        }
        if self.flag.is_none() && self.count == 0 {
            return Err("neither a flag nor a variable of theirs sets it".into());
        }
        Ok(())
    }
}
