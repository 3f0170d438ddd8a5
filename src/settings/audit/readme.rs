//! The README's table of their variables is rendered from the lists; a test fails when the
//! README's copy differs. `SLUICE_BLESS=1 cargo test --lib settings::audit` rewrites it.

use std::path::PathBuf;

use super::*;

const BEGIN: &str = "<!-- settings-audit:begin -->";
const END: &str = "<!-- settings-audit:end -->";

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The block between (and including) the markers.
fn render() -> String {
    let mut rows: Vec<(&str, String, &str)> = Vec::new();
    for (name, does) in HONOURED {
        rows.push((name, "honoured".into(), does));
    }
    for r in REFUSED {
        let status = match r.inert {
            Inert::Nothing => "**refused**",
            Inert::False => "**refused** unless false",
            Inert::Zero => "**refused** unless 0",
        };
        rows.push((r.name, status.into(), r.why));
    }
    for (name, why) in NO_EFFECT {
        rows.push((name, "no effect (noted at startup)".into(), why));
    }
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = format!(
        "{BEGIN}\n<!-- Rendered from src/settings/audit/; `SLUICE_BLESS=1 cargo test --lib \
         settings::audit` rewrites it. -->\n\n{} variables: {} honoured, {} refused, {} with no \
         effect.\n\n| variable | status | here |\n|---|---|---|\n",
        rows.len(),
        HONOURED.len(),
        REFUSED.len(),
        NO_EFFECT.len()
    );
    for (name, status, text) in rows {
        out.push_str(&format!("| `{name}` | {status} | {} |\n", cell(text)));
    }
    out.push_str(END);
    out
}

#[test]
fn the_readme_table_of_their_variables_is_the_lists() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("README.md has no {BEGIN} … {END} block");
    };
    let end = end + END.len();
    let expected = render();
    if readme[begin..end] == expected {
        return;
    }
    if std::env::var_os("SLUICE_BLESS").is_some() {
        let updated = format!("{}{expected}{}", &readme[..begin], &readme[end..]);
        std::fs::write(&path, updated).expect("write README.md");
        return;
    }
    panic!(
        "README.md's table of their variables differs from src/settings/audit/ \
         (SLUICE_BLESS=1 cargo test --lib settings::audit rewrites it). Expected:\n{expected}"
    );
}

/// The migration guide's "Not supported" list holds what is refused, each with its reason.
#[test]
fn the_readme_lists_every_refusal_as_not_supported() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(path).expect("README.md");
    let start = readme
        .find("**Not supported**")
        .expect("a Not supported list");
    let list = &readme[start..];
    let list = &list[..list.find("\n\n").unwrap_or(list.len())];
    for r in REFUSED {
        assert!(
            list.contains(&format!("`{}", r.name)),
            "{} missing from:\n{list}",
            r.name
        );
    }
    assert!(list.contains("`BACKEND_TYPE=memcache`"), "{list}");
}
