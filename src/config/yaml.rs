//! The serde_yaml plumbing shared by the parsing passes: the side channel that carries our
//! exact messages through serde errors (so serde_yaml attaches the position), document
//! paths (the locator that turns one back into a line is `locate.rs`), resource limits
//! explained, and Go `%v` formatting.
//!
//! serde_yaml only reveals a position through an error raised while a value is being
//! deserialized (`fix_mark`). So every pass raises `de::Error::custom` at the offending
//! node and keeps the real message in [`Ctx`]; validation errors found later on typed data
//! carry a [`Seg`] path and `locate.rs` re-reads the file to find it.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// `DeserializeSeed` for each visitor listed that reads whatever the node holds (serde_yaml
/// then calls the visitor's method for the node's kind); `{T: Bound}` before a type gives
/// its generic parameters.
macro_rules! seed_from_any {
    ($($({$($generics:tt)*})? $seed:ty),+) => {$(
        impl<'de, $($($generics)*)?> serde::de::DeserializeSeed<'de> for $seed {
            type Value = <Self as serde::de::Visitor<'de>>::Value;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
        }
    )+};
}
pub(super) use seed_from_any;

/// Their prefix for every message about a file's shape (YAML syntax or a field of the
/// wrong kind): `error loading config file: <msg>`.
pub(super) fn load(msg: impl fmt::Display) -> String {
    format!("error loading config file: {msg}")
}

/// Carries the first message raised during one deserialization pass, and the document
/// path of the node being read (left as it was when an error unwinds, so it names where a
/// position-less error, such as serde_yaml's alias limit, happened).
///
/// A pass that can walk past a problem (the key walk: an unknown key, a list element that
/// is not a map) raises it through [`Ctx::problem`], which lets the first `pass_over`
/// problems of the run go by: running the pass again with one more to pass over raises
/// the next one, each where serde_yaml stamps its position ([`Ctx::rerun`]).
#[derive(Default)]
pub(super) struct Ctx {
    msg: RefCell<Option<String>>,
    path: RefCell<Vec<Seg>>,
    /// Schema nodes a pass may still enter (see [`Ctx::budget_for`]).
    budget: Cell<usize>,
    over_budget: Cell<bool>,
    /// Problems this run lets go by, and how many it has.
    pass_over: Cell<usize>,
    passed: Cell<usize>,
    /// The error raised last was a problem the pass could have walked past.
    recoverable: Cell<bool>,
}

impl Ctx {
    /// A context whose passes each enter at most [`node_budget`] schema nodes.
    pub(super) fn budget_for(content: &str) -> Ctx {
        let ctx = Ctx::default();
        ctx.refill(content);
        ctx
    }

    /// A fresh budget for the next pass.
    pub(super) fn refill(&self, content: &str) {
        self.budget.set(node_budget(content));
    }

    /// A fresh start for the same pass over `content`, letting its first `pass_over`
    /// problems go by.
    pub(super) fn rerun(&self, content: &str, pass_over: usize) {
        self.refill(content);
        self.msg.borrow_mut().take();
        self.path.borrow_mut().clear();
        self.over_budget.set(false);
        self.pass_over.set(pass_over);
        self.passed.set(0);
        self.recoverable.set(false);
    }

    /// A problem the pass can walk past: `Ok` (go on as if the node were fine) for the
    /// first `pass_over` of the run, else raised as [`Ctx::fail`] does.
    pub(super) fn problem<E: de::Error>(&self, msg: impl Into<String>) -> Result<(), E> {
        if self.passed.get() < self.pass_over.get() {
            self.passed.set(self.passed.get() + 1);
            return Ok(());
        }
        let e = self.fail(msg);
        self.recoverable.set(true);
        Err(e)
    }

    /// Whether the error the pass ended with was a [`Ctx::problem`] (a rerun may find more).
    pub(super) fn recoverable(&self) -> bool {
        self.recoverable.get()
    }

    /// Entering the node at `seg` below the current one. `false` when the pass has
    /// entered more nodes than the text can hold without aliases: the caller fails there.
    #[must_use]
    pub(super) fn enter(&self, seg: Seg) -> bool {
        self.path.borrow_mut().push(seg);
        match self.budget.get().checked_sub(1) {
            Some(left) => {
                self.budget.set(left);
                true
            }
            None => {
                self.over_budget.set(true);
                false
            }
        }
    }

    /// Whether a pass stopped on its node budget.
    pub(super) fn over_budget(&self) -> bool {
        self.over_budget.get()
    }

    /// Leaving it, once read without error.
    pub(super) fn leave(&self) {
        self.path.borrow_mut().pop();
    }

    pub(super) fn path(&self) -> Vec<Seg> {
        self.path.borrow().clone()
    }

    /// Record `msg` (unless an inner node already recorded one) and return a serde error
    /// for serde_yaml to stamp with the current node's position.
    pub(super) fn fail<E: de::Error>(&self, msg: impl Into<String>) -> E {
        self.recoverable.set(false);
        self.note(msg);
        E::custom("sluice config error")
    }

    /// Record `msg` unless a message is already recorded (inner nodes are more precise).
    pub(super) fn note(&self, msg: impl Into<String>) {
        let mut slot = self.msg.borrow_mut();
        if slot.is_none() {
            *slot = Some(msg.into());
        }
    }

    pub(super) fn take(&self) -> Option<String> {
        self.msg.borrow_mut().take()
    }
}

/// The first YAML document of `content` (Go's yaml.v2 ignores later ones).
pub(super) fn first_document(content: &str) -> Option<serde_yaml::Deserializer<'_>> {
    serde_yaml::Deserializer::from_str(content).next()
}

/// 1-based (line, column) of a serde_yaml error.
pub(super) fn position(err: &serde_yaml::Error) -> (Option<usize>, Option<usize>) {
    match err.location() {
        Some(loc) => (Some(loc.line()), Some(loc.column())),
        None => (None, None),
    }
}

/// Most schema nodes (map entries and list elements of the rule schema) one pass enters:
/// every node takes at least two bytes of text, so only aliases can exceed it. serde_yaml's
/// own alias limit (a hundred times the document's events) comes later; this one stops a
/// bomb of aliased descriptor lists before its expansion costs seconds.
pub(super) fn node_budget(content: &str) -> usize {
    content.len().saturating_add(1000)
}

/// Our explanation of a pass stopped by [`node_budget`].
pub(super) const ALIAS_BUDGET: &str =
    "YAML aliases expand to more nodes than the file could hold without them (an alias bomb?)";

/// serde_yaml's resource limits, explained (its own text says what tripped, not why).
/// Both stop the parse early: an alias bomb ("billion laughs") is refused after about a
/// hundred times the document's own events, never expanded.
pub(super) fn limit_error(err: &serde_yaml::Error) -> Option<&'static str> {
    let text = err.to_string();
    if text.starts_with("repetition limit exceeded") {
        Some("YAML aliases expand to too much data (repetition limit exceeded: an alias bomb?)")
    } else if text.starts_with("recursion limit exceeded") {
        Some("YAML nested more than 128 levels deep (recursion limit exceeded)")
    } else {
        None
    }
}

/// `descriptors[0].rate_limit.unit`.
pub(super) fn render_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// One step from the document root to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seg {
    Key(&'static str),
    Index(usize),
}

/// A YAML value as Go's yaml.v2 would hold it in an `interface{}`, kept only to print it
/// the way Go's `%v` does in their error messages.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum GoValue {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    List(Vec<GoValue>),
    Map(Vec<(GoValue, GoValue)>),
}

impl<'de> de::Deserialize<'de> for GoValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GoValueVisitor)
    }
}

struct GoValueVisitor;

impl<'de> Visitor<'de> for GoValueVisitor {
    type Value = GoValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<GoValue, E> {
        Ok(GoValue::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<GoValue, E> {
        Ok(GoValue::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<GoValue, E> {
        Ok(GoValue::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<GoValue, E> {
        Ok(GoValue::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<GoValue, E> {
        // Only reachable beyond i128, where Go has no integer type either.
        Ok(GoValue::Float(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<GoValue, E> {
        Ok(GoValue::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<GoValue, E> {
        Ok(GoValue::Str(v.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<GoValue, E> {
        Ok(GoValue::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<GoValue, E> {
        Ok(GoValue::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoValue, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(GoValue::List(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoValue, A::Error> {
        let mut out = Vec::new();
        while let Some(kv) = map.next_entry()? {
            out.push(kv);
        }
        Ok(GoValue::Map(out))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<GoValue, A::Error> {
        // A local tag (`!foo bar`): Go prints the value, the tag is irrelevant here.
        let (_tag, variant): (IgnoredAny, _) = data.variant()?;
        de::VariantAccess::newtype_variant::<GoValue>(variant)
    }
}

impl fmt::Display for GoValue {
    /// Go's `fmt` `%v`: maps print as `map[k:v ...]` with sorted keys, lists as `[a b]`.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            GoValue::Null => f.write_str("<nil>"),
            GoValue::Bool(b) => write!(f, "{b}"),
            GoValue::Int(i) => write!(f, "{i}"),
            GoValue::Float(x) => f.write_str(&go_float(*x)),
            GoValue::Str(s) => f.write_str(s),
            GoValue::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            GoValue::Map(entries) => {
                let mut printed: Vec<(String, String)> = entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                printed.sort();
                f.write_str("map[")?;
                for (i, (k, v)) in printed.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{k}:{v}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// Go's `%v` for a float64: shortest digits, exponent form below 1e-4 or from 1e21 on.
pub(super) fn go_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let abs = x.abs();
    if abs == 0.0 || (1e-4..1e21).contains(&abs) {
        return format!("{x}");
    }
    // Rust prints `1.5e-7`; Go prints `1.5e-07` (sign always, at least two digits).
    let s = format!("{x:e}");
    match s.split_once('e') {
        Some((mant, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mant}e{sign}{digits:0>2}")
        }
        None => s,
    }
}
