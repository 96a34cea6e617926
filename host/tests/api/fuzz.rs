//! An OpenAPI-driven fuzz run: schemathesis (from PyPI; `scripts/test.sh` installs it
//! into `target/schemathesis`) generates requests from `/v1.0/openapi.json` for every
//! operation, valid and invalid, and checks that none answers 5xx and that every answer
//! matches the document (status code, content type, headers, body schema).

use crate::{binary, create_user, create_website};
use botgate_tests::http::Client;
use botgate_tests::repo_root;
use botgate_tests::servers::{Gateway, GatewayStore};
use std::path::PathBuf;
use std::process::Command;

/// The schemathesis command: `BOTGATE_SCHEMATHESIS`, or the one `scripts/test.sh`
/// installs.
fn schemathesis() -> PathBuf {
    std::env::var_os("BOTGATE_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/schemathesis/bin/st"))
}

#[test]
fn a_fuzz_run_from_the_openapi_document_finds_no_server_error_and_no_schema_violation() {
    let st = schemathesis();
    assert!(
        st.exists(),
        "schemathesis is not installed at {}: run scripts/test.sh (it installs it), or set \
         BOTGATE_SCHEMATHESIS",
        st.display()
    );
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--api-rate", "100000", "--api-burst", "100000"],
    )
    .expect("starting botgate");
    let key = &gateway.partner_keys[0];
    let partner = Client::new(&gateway.api, Some(key));
    create_user(&partner, "ann").unwrap();
    create_website(&partner, "ann", "ann.example").unwrap();

    let report = tempfile::tempdir().unwrap();
    let output = Command::new(&st)
        .arg("run")
        .arg(format!("{}/v1.0/openapi.json", gateway.api))
        .args(["--url", &gateway.api])
        .args(["--header", &format!("Authorization: Bearer {key}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_headers_conformance,response_schema_conformance",
        ])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args([
            "--max-examples",
            "60",
            "--seed",
            "20261121",
            // One worker: with two, Hypothesis's parsing of its own source from both
            // threads at once now and then trips CPython 3.11's `ast` (a SystemError,
            // "AST constructor recursion depth mismatch"), failing the run on the tool's
            // own error.
            "--workers",
            "1",
        ])
        .args(["--generation-database", "none", "--no-color"])
        .arg("--report-dir")
        .arg(report.path())
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .current_dir(report.path())
        .output()
        .expect("running schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{}\n---- botgate log ----\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.log()
    );
    // The run exercised every operation.
    assert!(
        stdout.contains("17 selected") || stdout.contains("17 total"),
        "{stdout}"
    );
}
