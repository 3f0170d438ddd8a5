//! What a setting is: its flag, its `SLUICE_*` variable (the flag's name, upper case), the
//! reference's variables that also set it (envoyproxy/ratelimit's, [`RefVar`]) and how their
//! values map, its default, its parser and its help. One [`Setting`] is written once, as a
//! field of a `settings!` struct (`declare.rs`); clap's arguments, `--help`, the settings
//! page's tables and the audit of the reference's variables are all read from it.

use clap::{Arg, ArgAction};

use super::env::Env;
use super::parse::SettingsError;
pub use super::ref_var::RefVar;

/// Most of the reference's variables one setting combines (`RUNTIME_ROOT`, `…_SUBDIRECTORY`,
/// `…_APPDIRECTORY`).
const MAX_REF_VARS: usize = 4;

/// Turns the reference's variables into a setting's value; `None` when none of them is set.
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

/// The part of a [`Setting`] that does not depend on its type: what clap, `--help`, the
/// settings page (`docs/reference/settings.md`) and the audit read.
pub struct Face {
    /// The long flag, without dashes; `None` for a setting only the reference's variables set.
    pub flag: Option<&'static str>,
    pub value_name: &'static str,
    pub shape: Shape,
    pub default: Option<&'static str>,
    /// The values the parser accepts, shown in `--help` and on the settings page.
    pub values: &'static [&'static str],
    vars: [RefVar; MAX_REF_VARS],
    count: usize,
    /// `--help`, and the settings page's text (a `settings!` field's doc comment).
    pub help: &'static str,
    /// A link the settings page adds to the help (`[Overload](../how-to/….md)`).
    pub see: Option<&'static str>,
    /// The settings page's default, when the declared one does not say it well (`4 MiB`, `off`).
    pub shown_default: Option<&'static str>,
    /// The settings page's cell for the reference's variables, when their names alone do not
    /// say how they map.
    pub shown_vars: Option<&'static str>,
}

impl Face {
    /// The reference's variables it reads.
    pub fn ref_vars(&self) -> &[RefVar] {
        &self.vars[..self.count]
    }
}

/// One setting. `T` is the type its field holds; `parse` reads the flag, the `SLUICE_*`
/// variable, the default and (unless `map` says otherwise) the reference's variable.
pub struct Setting<T> {
    pub(super) face: Face,
    pub(super) parse: fn(&str) -> Result<T, String>,
    pub(super) map: Option<Map<T>>,
}

impl<T> Setting<T> {
    const fn new(
        flag: Option<&'static str>,
        shape: Shape,
        parse: fn(&str) -> Result<T, String>,
    ) -> Self {
        Setting {
            face: Face {
                flag,
                value_name: "",
                shape,
                default: None,
                values: &[],
                vars: [RefVar::new("", ""); MAX_REF_VARS],
                count: 0,
                help: "",
                see: None,
                shown_default: None,
                shown_vars: None,
            },
            parse,
            map: None,
        }
    }

    /// `--flag VALUE` (and `SLUICE_FLAG`).
    pub const fn value(
        flag: &'static str,
        value_name: &'static str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Self {
        let mut s = Setting::new(Some(flag), Shape::Value, parse);
        s.face.value_name = value_name;
        s
    }

    /// `--flag VALUE`, repeatable; the values are joined.
    pub const fn repeated(
        flag: &'static str,
        value_name: &'static str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Self {
        let mut s = Setting::value(flag, value_name, parse);
        s.face.shape = Shape::Repeated;
        s
    }

    /// A setting only the reference's variables set: no flag, no `SLUICE_*` variable.
    pub const fn ref_only(parse: fn(&str) -> Result<T, String>) -> Self {
        Setting::new(None, Shape::Value, parse)
    }

    pub const fn default(mut self, value: &'static str) -> Self {
        self.face.default = Some(value);
        self
    }

    /// The values `parse` accepts, shown in `--help` and on the settings page.
    pub const fn values(mut self, values: &'static [&'static str]) -> Self {
        self.face.values = values;
        self
    }

    /// The reference's variable of the same meaning and syntax, read with `parse`.
    pub const fn same(self, var: RefVar) -> Self {
        self.ref_var(var)
    }

    /// The reference's variables are combined by `map` (declare each with [`Setting::ref_var`]).
    pub const fn map(mut self, map: Map<T>) -> Self {
        self.map = Some(map);
        self
    }

    /// One more of the reference's variables this setting reads.
    pub const fn ref_var(mut self, var: RefVar) -> Self {
        assert!(
            self.face.count < MAX_REF_VARS,
            "more variables than MAX_REF_VARS"
        );
        self.face.vars[self.face.count] = var;
        self.face.count += 1;
        self
    }

    /// The `--help` text (a `settings!` field's doc comment).
    pub const fn help(mut self, text: &'static str) -> Self {
        self.face.help = text.trim_ascii();
        self
    }

    /// A page the settings page links after the help.
    pub const fn see(mut self, link: &'static str) -> Self {
        self.face.see = Some(link);
        self
    }

    /// The settings page's default, when the declared one does not say it well.
    pub const fn shown_default(mut self, text: &'static str) -> Self {
        self.face.shown_default = Some(text);
        self
    }

    /// The settings page's cell for the reference's variables.
    pub const fn shown_vars(mut self, text: &'static str) -> Self {
        self.face.shown_vars = Some(text);
        self
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

/// A [`Setting`] of any type: its [`Face`], and what needs its parser.
pub trait Decl: Sync {
    fn face(&self) -> &Face;
    /// The clap argument of the flag; `None` for a setting only the reference's variables set.
    fn arg(&self) -> Option<Arg>;
    /// The declaration's own literals parse: its default and every listed value.
    #[cfg(test)]
    fn check(&self) -> Result<(), String>;
}

impl<T: Clone + Send + Sync + 'static> Decl for Setting<T> {
    fn face(&self) -> &Face {
        &self.face
    }

    fn arg(&self) -> Option<Arg> {
        let f = &self.face;
        let flag = f.flag?;
        let mut help = f.help.to_string();
        if !f.values.is_empty() {
            help.push_str(&format!(" [possible values: {}]", f.values.join(", ")));
        }
        help.push_str(&format!(" [env: {}]", sluice_var(flag)));
        if f.count > 0 {
            let names: Vec<_> = f.ref_vars().iter().map(|t| t.name).collect();
            help.push_str(&format!(" [also: {}]", names.join(", ")));
        }
        let mut arg = Arg::new(flag)
            .long(flag)
            .help(help)
            .value_parser(self.parse);
        arg = match f.shape {
            Shape::Value => arg.action(ArgAction::Set).value_name(f.value_name),
            Shape::Repeated => arg.action(ArgAction::Append).value_name(f.value_name),
            Shape::Switch => arg
                .action(ArgAction::Set)
                .value_name("BOOL")
                .num_args(0..=1)
                .default_missing_value("true"),
        };
        if let Some(d) = f.default {
            arg = arg.default_value(d);
        }
        Some(arg)
    }

    #[cfg(test)]
    fn check(&self) -> Result<(), String> {
        let f = &self.face;
        for v in f.default.iter().chain(f.values) {
            (self.parse)(v).map_err(|e| format!("{v}: {e}"))?;
        }
        if self.map.is_none() && f.count > 1 {
            return Err(
                "several of the reference's variables, and no `.map` to combine them".into(),
            );
        }
        if f.flag.is_none() && f.count == 0 {
            return Err("neither a flag nor a variable of the reference's sets it".into());
        }
        Ok(())
    }
}
