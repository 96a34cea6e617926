//! The `botgate` command as operators and rule authors use it: `ruleset check` and
//! `ruleset eval` against real built components.

use botgate_tests::{guest, ruleset_dir};
use std::process::{Command, Output};

fn botgate(args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_botgate"))
        .arg("--cache-dir")
        .arg(cache.path())
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("running botgate")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn check_accepts_good_components_and_names_what_is_wrong_with_bad_ones() {
    let template = guest("template");
    let liar = guest("liar");
    let output = botgate(&[
        "ruleset",
        "check",
        template.to_str().unwrap(),
        liar.to_str().unwrap(),
    ]);
    assert!(
        !output.status.success(),
        "a refused component fails the command"
    );
    let out = stdout(&output);
    assert!(out.contains("ok       template 2.0.0"), "{out}");
    assert!(
        out.contains("refused") && out.contains("`info` says its name is `wordpress`"),
        "{out}"
    );

    let output = botgate(&["ruleset", "check", template.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stdout(&output));
}

#[test]
fn eval_shows_each_opinion_and_the_decision() {
    let dir = ruleset_dir(&[("classifier", "classifier"), ("wordpress", "wordpress")]);
    let output = botgate(&[
        "ruleset",
        "eval",
        "--dir",
        dir.path().to_str().unwrap(),
        "--enable",
        "wordpress",
        "-X",
        "GET",
        "-H",
        "user-agent: python-requests/2.31",
        "https://shop.example/wp-config.php.bak",
    ]);
    let out = stdout(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("wordpress    security_issues"), "{out}");
    assert!(
        out.contains("decision     security_issues -> deny (by wordpress 2.0.0"),
        "{out}"
    );
}

#[test]
fn eval_refuses_a_url_without_scheme() {
    let dir = ruleset_dir(&[("classifier", "classifier")]);
    let output = botgate(&[
        "ruleset",
        "eval",
        "--dir",
        dir.path().to_str().unwrap(),
        "shop.example/",
    ]);
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("must start with http:// or https://"), "{err}");
}
