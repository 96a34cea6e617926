//! `botgate ruleset new NAME`: a rule-set project of its own, outside this repository,
//! with this release's WIT contract and guest SDK beside it, the template's rules and
//! tests renamed, and labelled requests for `botgate ruleset test`.

use anyhow::{Context, Result, bail};
use std::path::Path;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/scaffold_files.rs"));
}

/// The guest SDK's version: the guest workspace's.
const SDK_VERSION: &str = "2.0.0";

/// `name` in CamelCase, for the rule set's type.
fn camel(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn manifest(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
publish = false

[lib]
# The built component is `{name}.wasm`: its file name must be its `info().name`.
crate-type = ["cdylib", "rlib"]

[dependencies]
# botgate's guest SDK and WIT contract, as this release of botgate has them.
botgate-ruleset-sdk = {{ path = "botgate/sdk" }}

[workspace]

[profile.release]
opt-level = 3
lto = true
codegen-units = 1
panic = "abort"
strip = "debuginfo"
"#
    )
}

const SDK_MANIFEST: &str = r#"[package]
name = "botgate-ruleset-sdk"
version = "VERSION"
edition = "2024"
publish = false

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc", "std"] }
percent-encoding = "2"
botgate-normalise = { path = "../normalise" }
memchr = { version = "2", default-features = false, features = ["std"] }
aho-corasick = { version = "1.1", default-features = false, features = ["std"] }

[target.'cfg(target_family = "wasm")'.dependencies]
talc = { version = "5.1", default-features = false }
"#;

const NORMALISE_MANIFEST: &str = r#"[package]
name = "botgate-normalise"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
percent-encoding = "2"
memchr = { version = "2", default-features = false, features = ["std"] }
thiserror = "2"
"#;

/// The start of the rule set's reason ids: its name, with `-` for `_` (reason ids
/// are a-z, 0-9, `.` and `-`).
fn reason_prefix(name: &str) -> String {
    name.replace('_', "-")
}

fn cases(name: &str) -> String {
    let name = reason_prefix(name);
    let browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
    [
        format!(r#"{{"name": "a page view", "url": "https://www.example.com/blog/hello", "headers": {{"user-agent": "{browser}"}}, "expect": "abstain"}}"#),
        format!(r#"{{"name": "the uptime monitor", "url": "https://www.example.com/health", "headers": {{"user-agent": "ExampleMonitor/1.0"}}, "expect": {{"category": "services_and_payments", "reason": "{name}.monitor"}}}}"#),
        format!(r#"{{"name": "a backup probe", "url": "https://www.example.com/backup-2024.tar.gz", "headers": {{"user-agent": "curl/8.5.0"}}, "expect": {{"category": "security_issues", "reason": "{name}.backup-probe", "min_confidence": 80}}}}"#),
        r#"{"name": "a scripted login", "method": "POST", "url": "https://www.example.com/admin/login", "headers": {"user-agent": "python-requests/2.31"}, "expect": "suspicious_behaviour"}"#.to_owned(),
    ]
    .join("\n")
        + "\n"
}

fn readme(name: &str) -> String {
    format!(
        r#"# {name}: a botgate rule set

```sh
cargo test                                               # the rules, natively
cargo build --release --target wasm32-wasip2             # target/wasm32-wasip2/release/{name}.wasm
botgate ruleset test target/wasm32-wasip2/release/{name}.wasm --cases cases.jsonl
botgate ruleset push target/wasm32-wasip2/release/{name}.wasm
botgate ruleset activate {name} 0.1.0                    # or shadow a new version first
```

`botgate/` holds the guest SDK and `wit/` the contract of the botgate release that made
this project (`botgate ruleset new`); a newer release's are made the same way. The
version is the package's (`Cargo.toml`): push a new one for every change.
"#
    )
}

/// Writes the project for the rule set `name` into `dir` (which must not exist).
pub fn new(name: &str, dir: &Path) -> Result<()> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        bail!(
            "`{name}`: a new rule set's name is 1 to 64 of a-z, 0-9 and `_`, starting with a letter (it names the crate, the component and its reason ids)"
        );
    }
    if dir.exists() {
        bail!("{} exists already; name a new folder", dir.display());
    }
    let camel = camel(name);
    for (path, content) in embedded::FILES {
        let (path, content) = match path.strip_prefix("template/") {
            Some(rest) => (
                rest.to_owned(),
                content
                    .replace("The template rule set", &format!("The {name} rule set"))
                    .replace("\"template.", &format!("\"{}.", reason_prefix(name)))
                    .replace("\"template\"", &format!("\"{name}\""))
                    .replace("Template", &camel),
            ),
            None => (path.to_string(), content.to_string()),
        };
        write(dir, &path, &content)?;
    }
    write(dir, "Cargo.toml", &manifest(name))?;
    write(
        dir,
        "botgate/sdk/Cargo.toml",
        &SDK_MANIFEST.replace("VERSION", SDK_VERSION),
    )?;
    write(dir, "botgate/normalise/Cargo.toml", NORMALISE_MANIFEST)?;
    write(dir, "cases.jsonl", &cases(name))?;
    write(dir, "README.md", &readme(name))?;
    write(dir, ".gitignore", "/target\n")?;
    write(
        dir,
        ".cargo/config.toml",
        "# WebAssembly's 128-bit SIMD, which wasmtime runs on every host it supports.\n\
         [target.wasm32-wasip2]\nrustflags = [\"-C\", \"target-feature=+simd128\"]\n",
    )?;
    Ok(())
}

fn write(dir: &Path, path: &str, content: &str) -> Result<()> {
    let target = dir.join(path);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&target, content).with_context(|| format!("writing {}", target.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in every dependency table of `manifest` (`[dependencies]`, a target's
    /// and the features), each with its table, sorted.
    fn dependencies(manifest: &str) -> Vec<(&str, &str)> {
        let mut table = "";
        let mut names = Vec::new();
        for line in manifest.lines().map(str::trim) {
            if line.starts_with('[') {
                table = line;
                continue;
            }
            let listed = table.ends_with("dependencies]") || table == "[features]";
            let name = line.split(['=', '.']).next().map_or("", str::trim);
            if listed && !name.is_empty() && !name.starts_with('#') {
                names.push((table, name));
            }
        }
        names.sort_unstable();
        names
    }

    #[test]
    fn a_new_project_builds_the_sdk_with_the_dependencies_it_has_here() {
        let normalise = include_str!("../../../../api/normalise/Cargo.toml");
        let sdk = include_str!("../../../../rulesets/sdk/Cargo.toml");
        assert_eq!(dependencies(NORMALISE_MANIFEST), dependencies(normalise));
        assert_eq!(dependencies(SDK_MANIFEST), dependencies(sdk));
    }
}
