//! A boolean setting that does not parse says every form it accepts (their Go
//! `strconv.ParseBool`'s), not only `true/false`.

use crate::support::cli::command;

#[test]
fn a_bad_boolean_lists_the_accepted_forms() {
    let out = command("check")
        .arg("config")
        .env("MERGE_DOMAIN_CONFIG", "yes")
        .output()
        .expect("run sluice");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "sluice: invalid setting MERGE_DOMAIN_CONFIG: 'yes' is not a boolean: use true or false \
         (also accepted, as Go's strconv.ParseBool reads them: 1, t, T, TRUE, True, 0, f, F, \
         FALSE, False)"
    );
}
