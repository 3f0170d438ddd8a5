//! The reference's table of the reference's variables (`docs/reference/envoyproxy-ratelimit-variables.md`)
//! is rendered from the lists; a test fails when the page's copy differs.
//! `SLUICE_BLESS=1 cargo test --lib settings::` rewrites it.

use std::path::PathBuf;

use super::*;
use crate::settings::readme::{cell, check_block};

/// The block's text.
fn render() -> String {
    let honoured = honoured();
    let mut rows: Vec<(&str, String, String)> = Vec::new();
    for (t, does) in &honoured {
        rows.push((t.name, "honoured".into(), does.clone()));
    }
    for r in REFUSED {
        let status = match r.inert {
            Inert::Nothing => "**refused**",
            Inert::False => "**refused** unless false",
            Inert::Zero => "**refused** unless 0",
        };
        rows.push((r.name, status.into(), r.why.into()));
    }
    for (name, why) in NO_EFFECT {
        rows.push((name, "no effect (noted at startup)".into(), (*why).into()));
    }
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = format!(
        "<!-- Rendered from the settings' declarations and src/settings/audit/; \
         `SLUICE_BLESS=1 cargo test --lib settings::` rewrites it. -->\n\n{} variables: {} \
         honoured, {} refused, {} with no effect.\n\n| variable | status | here |\n|---|---|---|\n",
        rows.len(),
        honoured.len(),
        REFUSED.len(),
        NO_EFFECT.len()
    );
    for (name, status, text) in rows {
        out.push_str(&format!("| `{name}` | {status} | {} |\n", cell(&text)));
    }
    out
}

#[test]
fn the_reference_table_of_their_variables_is_the_lists() {
    check_block(
        "docs/reference/envoyproxy-ratelimit-variables.md",
        "settings-audit",
        &render(),
    );
}

/// The migration guide's "Not supported" list holds what is refused, each with its reason.
#[test]
fn the_migration_guide_lists_every_refusal_as_not_supported() {
    let guide = "docs/how-to/migrate-from-envoyproxy-ratelimit.md";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(guide);
    let readme = std::fs::read_to_string(path).expect(guide);
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
