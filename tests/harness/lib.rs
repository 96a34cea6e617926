//! The test harness: builds the guest components once per process, locates them, and
//! sets up registries that share the on-disk compiled-component cache.

pub mod ca;
pub mod http;
pub mod mix;
pub mod origin;
pub mod pebble;
pub mod provider;
pub mod receiver;
pub mod scripted_origin;
pub mod servers;
pub mod visitor;

use anyhow::{Context, Result, bail};
use botgate_host::rules::{Registry, Sandbox, SandboxConfig};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// The components shipped from `rulesets/`: the classifier, the Core Rule Set, the nine
/// CMS rule sets of the specification and the template.
pub fn shipped() -> Vec<&'static str> {
    botgate_host::rules::ALWAYS_ON
        .into_iter()
        .chain(botgate_model::KNOWN_RULESETS)
        .chain(["template"])
        .collect()
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The directory holding every built guest `.wasm` (shipped and hostile), built on
/// first use in this process.
pub fn guest_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build_guests().expect("building the guest components"))
}

/// Builds the guests unless `BOTGATE_SKIP_GUEST_BUILD` is set (the test command builds
/// them just before; a developer iterating on the host may set it too).
fn build_guests() -> Result<PathBuf> {
    let root = repo_root();
    let target_dir = root.join("rulesets").join("target");
    let out = target_dir.join("wasm32-wasip2").join("release");
    if std::env::var_os("BOTGATE_SKIP_GUEST_BUILD").is_some() {
        return Ok(out);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for manifest in ["rulesets/Cargo.toml", "tests/guests/Cargo.toml"] {
        let status = Command::new(&cargo)
            .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
            .arg("--manifest-path")
            .arg(root.join(manifest))
            .arg("--target-dir")
            .arg(&target_dir)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            // The test command lints the host's crates through clippy's driver; the
            // guests are built as they are shipped.
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CLIPPY_ARGS")
            .status()
            .with_context(|| format!("running {cargo} build for {manifest}"))?;
        if !status.success() {
            bail!(
                "building the guests of {manifest} failed ({status}); is the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`"
            );
        }
    }
    Ok(out)
}

/// The built `<name>.wasm`.
pub fn guest(name: &str) -> PathBuf {
    let path = guest_dir().join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// The bytes of the built `<name>.wasm`.
pub fn guest_bytes(name: &str) -> Vec<u8> {
    std::fs::read(guest(name)).expect("reading a built guest")
}

/// The compiled-component cache every test shares.
pub fn cache_dir() -> PathBuf {
    repo_root().join("target").join("component-cache")
}

/// A registry with `config` and the shared cache.
pub fn registry_with(config: SandboxConfig) -> Arc<Registry> {
    let sandbox = Sandbox::new(config).expect("creating the sandbox");
    Arc::new(Registry::new(sandbox, Some(cache_dir())))
}

/// The sandbox configuration of tests: the defaults, but with a call deadline long
/// enough that a busy machine descheduling a thread never fails an ordinary call (the
/// deadline is wall-clock, counted in epoch ticks).
pub fn test_config() -> SandboxConfig {
    SandboxConfig {
        call_deadline: std::time::Duration::from_millis(1_000),
        instantiate_deadline: std::time::Duration::from_millis(2_000),
        ..SandboxConfig::default()
    }
}

/// A registry with [`test_config`] and the shared cache.
pub fn registry() -> Arc<Registry> {
    registry_with(test_config())
}

/// A temporary rule-set directory holding copies of the named built guests, each
/// under the file name given (`("versioned_one", "versioned")` copies
/// `versioned_one.wasm` to `versioned.wasm`).
pub fn ruleset_dir(entries: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("creating a temporary directory");
    for (built, as_name) in entries {
        std::fs::copy(guest(built), dir.path().join(format!("{as_name}.wasm")))
            .expect("copying a guest");
    }
    dir
}

/// A temporary rule-set directory with every shipped component.
pub fn shipped_dir() -> tempfile::TempDir {
    let entries: Vec<(&str, &str)> = shipped().into_iter().map(|n| (n, n)).collect();
    ruleset_dir(&entries)
}

/// Copies `from` over `to` atomically (write beside, then rename), as an operator's
/// deploy script would.
pub fn replace_atomically(from: &Path, to: &Path) {
    let tmp = to.with_file_name(format!(
        ".{}.tmp",
        to.file_name().expect("a file name").to_string_lossy()
    ));
    std::fs::copy(from, &tmp).expect("copying");
    std::fs::rename(&tmp, to).expect("renaming into place");
}

/// Installs a log subscriber once, so failing tests show the engine's log lines.
pub fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "botgate_host=info".into()),
            )
            .with_test_writer()
            .try_init();
    });
}

/// The facts of a request over HTTPS/1.1 to `www.example.com` from a public address:
/// `method` to `target` (`path?query`) with `headers`.
pub fn facts(
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> botgate_host::rules::RequestFacts {
    use botgate_host::rules::facts::{RequestParts, request_facts};
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let request = RequestParts {
        method,
        https: true,
        host: "www.example.com",
        path,
        query,
        version: ::http::Version::HTTP_11,
        headers: headers.iter().map(|(n, v)| (*n, v.as_bytes())),
        client_ip: std::net::IpAddr::from([198, 51, 100, 7]),
    };
    request_facts(request, &botgate_host::client::ClientFacts::default())
}
