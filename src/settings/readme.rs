//! The settings reference's tables (`docs/reference/settings.md`) are rendered from the
//! declarations; a test fails when the page's copy differs, and
//! `SLUICE_BLESS=1 cargo test --lib settings::` rewrites it. A block is the text between
//! `<!-- NAME:begin -->` and `<!-- NAME:end -->` of a Markdown file, so another document can
//! carry one too ([`check_block`]).

use std::path::PathBuf;

use super::ListenSettings;
use super::Settings;
use super::decl::{Decl, Face, sluice_var};
use super::resolver::table;

/// A help text as a table cell starts it: `Never deny` → `never deny`, `A new` → `a new`;
/// names stay as they are (`RLQS: …`, `OTLP …`, `DogStatsD: …`, `gRPC …`).
pub(super) fn lower_first(s: &str) -> String {
    let word: String = s.chars().take_while(|c| c.is_alphabetic()).collect();
    let mut chars = word.chars();
    match chars.next() {
        Some(first) if first.is_uppercase() && chars.all(char::is_lowercase) => first
            .to_lowercase()
            .chain(s[first.len_utf8()..].chars())
            .collect(),
        _ => s.to_owned(),
    }
}

/// A Markdown table cell.
pub(super) fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The settings page's default cell: the shown default, else the declared one (booleans,
/// numbers and durations as they are; anything else a literal value).
pub(super) fn shown_default(f: &Face) -> Option<String> {
    if let Some(s) = f.shown_default {
        return Some(s.to_owned());
    }
    let d = f.default?;
    let plain = matches!(d, "true" | "false")
        || d.parse::<f64>().is_ok()
        || humantime::parse_duration(d).is_ok();
    Some(if plain {
        d.to_owned()
    } else {
        format!("`{d}`")
    })
}

/// The table of `decls`, one row each.
fn render(decls: &[&'static dyn Decl]) -> String {
    let mut out = String::from(
        "| flag (`SLUICE_…`) | envoyproxy/ratelimit variable | default | meaning |\n\
         |---|---|---|---|\n",
    );
    for d in decls {
        let f = d.face();
        let flag = f
            .flag
            .map(|f| {
                let var = sluice_var(f);
                format!("`--{f}` (`{}`)", &var["SLUICE_".len()..])
            })
            .unwrap_or_default();
        let vars = f.shown_vars.map(str::to_owned).unwrap_or_else(|| {
            let names: Vec<_> = f
                .ref_vars()
                .iter()
                .map(|t| format!("`{}`", t.name))
                .collect();
            names.join(", ")
        });
        let meaning = match f.see {
            Some(link) => format!("{}; see {link}", f.help),
            None => f.help.to_owned(),
        };
        out.push_str(&format!(
            "| {flag} | {vars} | {} | {} |\n",
            cell(&shown_default(f).unwrap_or_default()),
            cell(&lower_first(&meaning)),
        ));
    }
    out
}

/// `serve`'s settings: the listeners' in their own table, the rest in the main one.
fn tables() -> (String, String) {
    let listen = table::<ListenSettings>();
    let is_listen = |d: &&'static dyn Decl| {
        listen
            .iter()
            .any(|l| std::ptr::addr_eq(*l as *const dyn Decl, *d as *const dyn Decl))
    };
    let (listen, main): (Vec<_>, Vec<_>) = table::<Settings>().into_iter().partition(is_listen);
    (render(&main), render(&listen))
}

/// Fails unless the block `name` of `file` (a path from the repository's root) is
/// `expected`; under `SLUICE_BLESS` it rewrites the block instead.
pub(super) fn check_block(file: &str, name: &str, expected: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file);
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (begin, end) = (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    );
    let (Some(b), Some(e)) = (readme.find(&begin), readme.find(&end)) else {
        panic!("{file} has no {begin} … {end} block");
    };
    let inside = b + begin.len();
    let expected = format!("\n{}\n", expected.trim_end());
    if readme[inside..e] == expected {
        return;
    }
    if std::env::var_os("SLUICE_BLESS").is_some() {
        let updated = format!("{}{expected}{}", &readme[..inside], &readme[e..]);
        std::fs::write(&path, updated).unwrap_or_else(|e| panic!("{file}: {e}"));
        return;
    }
    panic!(
        "{file}'s block {name} differs from the settings' declarations \
         (SLUICE_BLESS=1 cargo test --lib settings:: rewrites it). Expected:\n{expected}"
    );
}

#[test]
fn the_reference_tables_of_settings_are_the_declarations() {
    let (main, listen) = tables();
    check_block("docs/reference/settings.md", "settings", &main);
    check_block("docs/reference/settings.md", "settings-listen", &listen);
}
