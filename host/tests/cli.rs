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

/// Writes `text` as a configuration file in `dir`.
fn config_file(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("botgate.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn config_check_names_the_key_and_the_line_of_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let good = config_file(
        &dir,
        "# the gateway\nhttp-listen = \"0.0.0.0:8180\"\napi-rate = 20\n\
         trusted-proxy = [\"10.0.0.0/8\", \"192.168.0.0/16\"]\nno-acme = true\n",
    );
    let output = botgate(&["config", "check", &good]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("the configuration is valid"));
    for (text, says) in [
        (
            "http-listen = \"0.0.0.0:8180\"\nhttp-lisen = \"x\"\n",
            ":2: unknown key `http-lisen`",
        ),
        (
            "\napi-rate = \"fast\"\n",
            ":2: `api-rate`: invalid value 'fast'",
        ),
        ("api-rate = 0\n", ":1: `api-rate`: invalid value '0'"),
        (
            "http-listen = [\"a\", \"b\"]\n",
            ":1: `http-listen` takes one value, not a list",
        ),
        ("no-acme = \"yes\"\n", ":1: `no-acme` must be true or false"),
        (
            "acme-challenge = \"dns-01\"\n",
            "[possible values: http-01, tls-alpn-01]",
        ),
        ("[serve]\napi-rate = 3\n", ":1: `serve` must be a string"),
        ("api-rate = [1\n", ":1: not valid TOML"),
        (
            "api-cert = \"/tmp/cert.pem\"\n",
            "--api-cert and --api-key go together",
        ),
        (
            "redis-url = \"redis://127.0.0.1:1\"\nredis-sentinel = [\"127.0.0.1:2\"]\n",
            "both --redis-url and --redis-sentinel name a store",
        ),
        (
            "fallback-key = \"/tmp/key.pem\"\n",
            "--fallback-cert and --fallback-key go together",
        ),
    ] {
        let file = config_file(&dir, text);
        let output = botgate(&["config", "check", &file]);
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success(), "{text}: {err}");
        assert!(err.contains(says), "{text}: {err}");
        // `serve` refuses the same file before it starts.
        let serve = botgate(&["serve", "--config", &file]);
        let served = String::from_utf8_lossy(&serve.stderr).into_owned();
        assert!(!serve.status.success(), "{text}: {served}");
        assert!(served.contains(says), "{text}: {served}");
    }
}

#[test]
fn config_show_gives_the_effective_configuration_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = config_file(
        &dir,
        "api-rate = 7\napi-burst = 70\nredis-url = \"redis://:hunter2@10.0.0.5:16379/0\"\n\
         redis-password = \"hunter2\"\ntrusted-proxy = [\"10.0.0.0/8\"]\n\
         crawler-networks = [\"mybot=https://u:hunter2@lists.example/n.json?a=1&token=hunter2\"]\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_botgate"))
        .args(["config", "show", &file])
        .env("BOTGATE_API_RATE", "9")
        .env_remove("BOTGATE_API_BURST")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let shown = stdout(&output);
    assert!(!shown.contains("hunter2"), "{shown}");
    for line in [
        "api-rate = 9 # environment".to_owned(),
        format!("api-burst = 70 # {file}"),
        format!("redis-password = \"<redacted>\" # {file}"),
        format!("redis-url = \"redis://:redacted@10.0.0.5:16379/0\" # {file}"),
        format!("trusted-proxy = [\"10.0.0.0/8\"] # {file}"),
        format!(
            "crawler-networks = [\"mybot=https://u:redacted@lists.example/n.json?a=1&token=redacted\"] \
             # {file}"
        ),
        "http-listen = \"127.0.0.1:8180\" # default".to_owned(),
        "no-acme = false # default".to_owned(),
    ] {
        assert!(shown.lines().any(|shown| shown == line), "{line}\n{shown}");
    }
}

#[test]
fn serve_takes_the_file_below_the_environment_and_the_flags() {
    use botgate_tests::servers::free_port;
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let port = |_| free_port().to_string();
    let [from_file, from_env, from_flag, admin, api] = [0, 1, 2, 3, 4].map(port);
    let file = config_file(
        &dir,
        &format!(
            "data-dir = \"{data}\"\nrulesets-dir = \"{data}\"\nno-http3 = true\n\
             http-listen = \"127.0.0.1:{from_file}\"\nhttps-listen = \"127.0.0.1:{from_file}\"\n\
             admin-listen = \"127.0.0.1:{admin}\"\napi-listen = \"127.0.0.1:{api}\"\n",
            data = dir.path().display()
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_botgate"))
        .args(["serve", "--config", &file])
        .args(["--http-listen", &format!("127.0.0.1:{from_flag}")])
        .env("BOTGATE_HTTPS_LISTEN", format!("127.0.0.1:{from_env}"))
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    let wanted = [
        format!("HTTP listening address=127.0.0.1:{from_flag}"),
        format!("HTTPS listening address=127.0.0.1:{from_env}"),
        format!("admin listening address=127.0.0.1:{admin}"),
        format!("management API listening address=127.0.0.1:{api}"),
    ];
    while !wanted.iter().all(|line| log.contains(line.as_str())) {
        match lines.next() {
            Some(Ok(line)) => {
                log.push_str(&line);
                log.push('\n');
            }
            _ => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    for line in &wanted {
        assert!(log.contains(line.as_str()), "{line}\n{log}");
    }
    assert!(log.contains("options from the configuration file"), "{log}");
}
