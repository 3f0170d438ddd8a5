//! The table itself: one resolution for every command, from an injected environment, in
//! one order of precedence; declarations whose literals parse.

use super::*;
use crate::settings::decl::sluice_var;
use crate::settings::resolver::table;

/// `sluice ARGV` under `env`, a map.
fn run(argv: &[&str], env: &[(&str, &str)]) -> Result<Invocation, Error> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    resolve(
        std::iter::once("sluice").chain(argv.iter().copied()),
        &|k| env.get(k).cloned(),
    )
}

#[test]
fn an_injected_environment_sets_sluice_and_their_variables_alike() {
    // Nothing here is in the process's environment: the map is all resolution reads.
    let env = [
        ("SLUICE_GRPC_ADDR", "127.0.0.1:7001"),
        ("HOST", "127.0.0.2"),
        ("PORT", "7002"),
        ("SLUICE_SHADOW_MODE", "true"),
        ("QUOTA_MODE", "1"),
        ("SLUICE_CONFIG", "a,b"),
        ("SLUICE_REDIS_TIMEOUT", "250ms"),
        ("REDIS_URL", "redis.internal:6379"),
    ];
    let s = serve(&[], &env).unwrap();
    assert_eq!(s.grpc_addr.to_string(), "127.0.0.1:7001");
    assert_eq!(s.http_addr.to_string(), "127.0.0.2:7002");
    assert!(s.decision.shadow_mode && s.decision.quota_mode);
    assert_eq!(s.config_paths, [PathBuf::from("a"), PathBuf::from("b")]);
    let r = s.redis.expect("their REDIS_URL");
    assert_eq!(r.main.url, "redis://redis.internal:6379");
    assert_eq!(r.main.request_timeout, Duration::from_millis(250));
}

/// Flag, then `SLUICE_*`, then theirs, then the default: for a value, a switch and a
/// repeated flag.
#[test]
fn precedence_is_flag_then_sluice_variable_then_theirs_then_default() {
    let addr =
        |args: &[&str], env: &[(&str, &str)]| serve(args, env).unwrap().grpc_addr.to_string();
    let ref_vars = [("GRPC_HOST", "127.0.0.3"), ("GRPC_PORT", "7003")];
    let mut both = ref_vars.to_vec();
    both.push(("SLUICE_GRPC_ADDR", "127.0.0.2:7002"));
    let flag = ["--grpc-addr", "127.0.0.1:7001"];
    assert_eq!(addr(&flag, &both), "127.0.0.1:7001");
    assert_eq!(addr(&[], &both), "127.0.0.2:7002");
    assert_eq!(addr(&[], &ref_vars), "127.0.0.3:7003");
    assert_eq!(addr(&[], &[]), "0.0.0.0:8081");

    let shadow =
        |args: &[&str], env: &[(&str, &str)]| serve(args, env).unwrap().decision.shadow_mode;
    assert!(!shadow(
        &["--shadow-mode=false"],
        &[("SLUICE_SHADOW_MODE", "true")]
    ));
    assert!(!shadow(
        &[],
        &[("SLUICE_SHADOW_MODE", "f"), ("SHADOW_MODE", "true")]
    ));
    assert!(shadow(&[], &[("SHADOW_MODE", "T")]));

    let config = |args: &[&str], env: &[(&str, &str)]| serve(args, env).unwrap().config_paths;
    let runtime = [("RUNTIME_ROOT", "/srv"), ("SLUICE_CONFIG", "x")];
    assert_eq!(
        config(&["--config", "a", "--config", "b,c"], &runtime).len(),
        3
    );
    assert_eq!(config(&[], &runtime), [PathBuf::from("x")]);
    assert_eq!(config(&[], &runtime[..1]), [PathBuf::from("/srv/config")]);
}

#[test]
fn an_invalid_variable_is_named_whichever_side_set_it() {
    for (env, name) in [
        (("SLUICE_MAX_ENTRIES", "many"), "SLUICE_MAX_ENTRIES"),
        (("SLUICE_SHADOW_MODE", "maybe"), "SLUICE_SHADOW_MODE"),
        (("SHADOW_MODE", "maybe"), "SHADOW_MODE"),
        (("SLUICE_BATCH_INTERVAL", "2m"), "SLUICE_BATCH_INTERVAL"),
    ] {
        assert_eq!(setting_error(&[], &[env]).name, name);
    }
    // A flag's value is clap's to refuse, with the same parser's message.
    let e = serve(&["--max-entries", "many"], &[]).unwrap_err();
    assert!(matches!(e, Error::CommandLine(_)), "{e}");
    assert!(
        e.to_string().contains("'many' is not a valid number"),
        "{e}"
    );
}

/// `check` and `explain` read `--merge-domains`, `--config` and `--cache-key-prefix` with
/// the reference's variables as `serve` does, and refuse what it refuses.
#[test]
fn check_and_explain_share_serves_settings() {
    let bad = [("MERGE_DOMAIN_CONFIG", "maybe")];
    for argv in [
        &["serve"][..],
        &["check", "config"],
        &["explain", "--domain", "d", "--descriptor", "k=v"],
    ] {
        match run(argv, &bad) {
            Err(Error::Setting { command, error }) => {
                assert_eq!(command, argv[0]);
                assert_eq!(error.name, "MERGE_DOMAIN_CONFIG");
                assert!(
                    error.message.contains("'maybe' is not a boolean"),
                    "{error}"
                );
            }
            other => panic!("{argv:?}: {other:?}"),
        }
    }
    let env = [("MERGE_DOMAIN_CONFIG", "true"), ("RUNTIME_ROOT", "/srv")];
    let Ok(Invocation::Check(args, s)) = run(&["check", "--merge-domains=false", "x"], &env) else {
        panic!("check")
    };
    assert_eq!(args.paths, [PathBuf::from("x")]);
    assert!(!s.merge_domains, "the flag wins");
    let argv = ["explain", "--domain", "d", "--descriptor", "k=v"];
    let Ok(Invocation::Explain(_, s)) = run(&argv, &env) else {
        panic!("explain")
    };
    assert!(s.merge_domains);
    assert_eq!(s.config_paths, [PathBuf::from("/srv/config")]);
    let e = run(&argv, &[("CACHE_KEY_PREFIX", "a{b}")]).unwrap_err();
    assert_eq!(
        e.setting().map(|e| e.name.as_str()),
        Some("CACHE_KEY_PREFIX")
    );
}

#[test]
fn every_declaration_parses_its_own_default_and_values() {
    let mut flags = std::collections::BTreeSet::new();
    for d in table::<Settings>() {
        let flag = d.face().flag;
        d.check().unwrap_or_else(|e| panic!("{flag:?}: {e}"));
        assert!(!d.face().help.is_empty(), "{flag:?}: no help");
        if let Some(f) = flag {
            assert!(flags.insert(f), "--{f} is declared twice");
            assert_eq!(
                sluice_var(f),
                format!("SLUICE_{}", f.to_uppercase().replace('-', "_"))
            );
        }
    }
}

/// `Default` of every `settings!` struct is the resolution of an empty command line.
#[test]
fn defaults_are_an_empty_command_line() {
    assert_eq!(serve(&[], &[]).unwrap(), Settings::default());
    // The stores' defaults are the declarations'.
    let s = Settings::default();
    assert_eq!(
        s.caps.memory_max_bytes,
        crate::store::memory::MemoryOptions::default().max_bytes
    );
}
