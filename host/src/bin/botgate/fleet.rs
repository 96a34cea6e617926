//! `botgate ruleset push | list | activate | rollback | remove`: rule components for
//! every gateway sharing a store, through a running gateway's admin listener when it
//! holds the embedded store, and on the store directly otherwise.

use crate::partner::{Target, Via, admin_answer, agent};
use anyhow::{Context, Result, bail};
use botgate_host::fleet;
use botgate_host::fleet::signing::TrustedKeys;
use botgate_host::gateway::admin::{OPERATOR_HEADER, SIGNATURE_HEADER};
use botgate_host::rules::{DirectorySource, Registry};
use botgate_store::rulesets::{FailurePolicy, Pushed, PushedRuleset, RulesetState, ShadowResults};
use clap::Subcommand;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Subcommand)]
pub enum FleetCommand {
    /// Validate a component as the gateways load one and store it for every gateway
    /// sharing the store (not yet in service: `activate` puts it there).
    Push {
        /// `<name>.wasm`; its stem is the component's name.
        file: PathBuf,
        /// A detached ed25519 signature of the file (base64, or raw 64 bytes).
        #[arg(long, value_name = "FILE")]
        signature: Option<PathBuf>,
        #[command(flatten)]
        target: Target,
    },
    /// List the pushed versions, which one each name runs, and what this gateway runs.
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Put a pushed version in service on every gateway (within a second).
    Activate {
        name: String,
        version: String,
        #[command(flatten)]
        trusted_keys: TrustedKeyArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Put back the version that ran before the active one.
    Rollback {
        name: String,
        #[command(flatten)]
        trusted_keys: TrustedKeyArgs,
        #[command(flatten)]
        target: Target,
    },
    /// How a component's failure (a trap, its deadline, switched off) treats a request,
    /// on every gateway: `open` decides it without the component, `closed` refuses it
    /// (403, `security_issues`, reason `<name>.failed`). Pushed or from the directory.
    Failure {
        name: String,
        #[arg(value_parser = ["open", "closed"])]
        policy: String,
        #[command(flatten)]
        target: Target,
    },
    /// Run a pushed version in shadow on every gateway: evaluated beside the active one
    /// on a share of the requests it judges, logged and counted, never acted on.
    Shadow {
        name: String,
        version: String,
        /// The share of the active version's requests, 1 to 100.
        #[arg(long, default_value = "10", value_parser = clap::value_parser!(u8).range(1..=100))]
        percent: u8,
        #[command(flatten)]
        trusted_keys: TrustedKeyArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Stop a shadow rollout (activate the version instead to put it in service).
    Unshadow {
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// The requests on which the version in shadow and the active one disagreed: counts
    /// by category pair, summed over every gateway, and the latest samples.
    Diff {
        name: String,
        /// Another version than the one in shadow now.
        #[arg(long)]
        version: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Forget a pushed version that is not in service.
    Remove {
        name: String,
        version: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Refuses a name that is no component's: it goes into the admin listener's paths.
fn check_name(name: &str) -> Result<()> {
    name.parse::<botgate_model::rulesets::RulesetName>()
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The keys a version needs a signature of, on the store directly (through a running
/// gateway's admin listener, the gateway's own apply).
#[derive(clap::Args)]
pub struct TrustedKeyArgs {
    /// A key whose signature the version needs (as `serve --ruleset-trusted-key`).
    #[arg(
        long = "ruleset-trusted-key",
        value_name = "FILE",
        env = "BOTGATE_RULESET_TRUSTED_KEYS",
        value_delimiter = ','
    )]
    files: Vec<PathBuf>,
}

/// Who runs the command, as kept with what it changes: `user@host`.
fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "operator".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    match host.trim() {
        "" => user,
        host => format!("{user}@{host}"),
    }
}

/// A request to the admin listener with the operator's token and name.
fn send(
    url: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<(&[u8], Option<&str>)>,
) -> Result<serde_json::Value> {
    let target = format!("{url}{path}");
    let agent = agent();
    let authorization = format!("Bearer {token}");
    let answer = match (method, body) {
        ("POST", Some((bytes, signature))) => {
            let mut request = agent
                .post(target)
                .header("authorization", authorization)
                .header(OPERATOR_HEADER, operator())
                .header("content-type", "application/wasm");
            if let Some(signature) = signature {
                request = request.header(SIGNATURE_HEADER, signature);
            }
            request.send(bytes)
        }
        ("POST", None) => agent
            .post(target)
            .header("authorization", authorization)
            .header(OPERATOR_HEADER, operator())
            .send_empty(),
        ("DELETE", _) => agent
            .delete(target)
            .header("authorization", authorization)
            .call(),
        _ => agent
            .get(target)
            .header("authorization", authorization)
            .call(),
    };
    admin_answer(answer, url)
}

/// A signature file's content as the store keeps it: base64.
fn signature_text(file: &PathBuf) -> Result<String> {
    use base64::Engine;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let engine = base64::engine::general_purpose::STANDARD;
    if bytes.len() == 64 {
        return Ok(engine.encode(&bytes));
    }
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    match engine.decode(&text) {
        Ok(raw) if raw.len() == 64 => Ok(text),
        _ => bail!(
            "{}: a signature is 64 bytes, raw or in base64",
            file.display()
        ),
    }
}

pub fn run(command: FleetCommand, registry: impl FnOnce() -> Result<Arc<Registry>>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match command {
            FleetCommand::Push {
                file,
                signature,
                target,
            } => push(&target, &file, signature.as_ref(), registry).await,
            FleetCommand::List { target } => list(&target).await,
            FleetCommand::Activate {
                name,
                version,
                trusted_keys,
                target,
            } => {
                check_name(&name)?;
                fleet::check_version(&version)?;
                let state = match target.via().await? {
                    Via::Admin { url, token } => {
                        let path = format!("/operator/rulesets/{name}/activate/{version}");
                        serde_json::from_value(send(&url, &token, "POST", &path, None)?)?
                    }
                    Via::Store(store) => {
                        let trusted = TrustedKeys::read(&trusted_keys.files)?;
                        fleet::activate(&store, &name, &version, &operator(), &trusted).await?
                    }
                };
                eprintln!("{name} {version} is active; every gateway runs it within a second");
                print_state(&name, &state);
                Ok(())
            }
            FleetCommand::Rollback {
                name,
                trusted_keys,
                target,
            } => {
                check_name(&name)?;
                let state: RulesetState = match target.via().await? {
                    Via::Admin { url, token } => {
                        let path = format!("/operator/rulesets/{name}/rollback");
                        serde_json::from_value(send(&url, &token, "POST", &path, None)?)?
                    }
                    Via::Store(store) => {
                        let trusted = TrustedKeys::read(&trusted_keys.files)?;
                        fleet::rollback(&store, &name, &operator(), &trusted).await?
                    }
                };
                eprintln!(
                    "{name} is back to {}",
                    state.active.as_deref().unwrap_or("?")
                );
                print_state(&name, &state);
                Ok(())
            }
            FleetCommand::Failure {
                name,
                policy,
                target,
            } => {
                check_name(&name)?;
                let state: RulesetState = match target.via().await? {
                    Via::Admin { url, token } => {
                        let path = format!("/operator/rulesets/{name}/failure/{policy}");
                        serde_json::from_value(send(&url, &token, "POST", &path, None)?)?
                    }
                    Via::Store(store) => {
                        let policy: FailurePolicy =
                            policy.parse().map_err(anyhow::Error::msg)?;
                        fleet::set_failure_policy(&store, &name, policy, &operator()).await?
                    }
                };
                eprintln!("{name} fails {} on every gateway", state.failure.as_str());
                Ok(())
            }
            FleetCommand::Shadow {
                name,
                version,
                percent,
                trusted_keys,
                target,
            } => {
                check_name(&name)?;
                fleet::check_version(&version)?;
                let state: RulesetState = match target.via().await? {
                    Via::Admin { url, token } => {
                        let path = format!("/operator/rulesets/{name}/shadow/{version}/{percent}");
                        serde_json::from_value(send(&url, &token, "POST", &path, None)?)?
                    }
                    Via::Store(store) => {
                        let trusted = TrustedKeys::read(&trusted_keys.files)?;
                        fleet::shadow(&store, &name, &version, percent, &operator(), &trusted)
                            .await?
                    }
                };
                eprintln!(
                    "{name} {version} runs in shadow on {percent}% of the requests {name} {} judges; `botgate ruleset diff {name}` shows where they disagree",
                    state.active.as_deref().unwrap_or("(from the directory)")
                );
                Ok(())
            }
            FleetCommand::Unshadow { name, target } => {
                check_name(&name)?;
                match target.via().await? {
                    Via::Admin { url, token } => {
                        let path = format!("/operator/rulesets/{name}/shadow");
                        send(&url, &token, "DELETE", &path, None)?;
                    }
                    Via::Store(store) => {
                        fleet::unshadow(&store, &name, &operator()).await?;
                    }
                }
                eprintln!("{name} runs no version in shadow");
                Ok(())
            }
            FleetCommand::Diff {
                name,
                version,
                target,
            } => {
                check_name(&name)?;
                if let Some(version) = &version {
                    fleet::check_version(version)?;
                }
                let (version, results): (String, ShadowResults) = match target.via().await? {
                    Via::Admin { url, token } => {
                        // A version is letters, digits and `._+-`: only `+` needs escaping.
                        let query = version
                            .map(|v| format!("?version={}", v.replace('+', "%2B")))
                            .unwrap_or_default();
                        let path = format!("/operator/rulesets/{name}/diff{query}");
                        let body = send(&url, &token, "GET", &path, None)?;
                        (
                            serde_json::from_value(body["version"].clone())?,
                            serde_json::from_value(body["results"].clone())?,
                        )
                    }
                    Via::Store(store) => fleet::diff(&store, &name, version.as_deref()).await?,
                };
                print!("{}", describe_diff(&name, &version, &results));
                Ok(())
            }
            FleetCommand::Remove {
                name,
                version,
                target,
            } => {
                check_name(&name)?;
                fleet::check_version(&version)?;
                match target.via().await? {
                    Via::Admin { url, token } => {
                        let path = format!("/operator/rulesets/{name}/versions/{version}");
                        send(&url, &token, "DELETE", &path, None)?;
                    }
                    Via::Store(store) => fleet::remove(&store, &name, &version).await?,
                }
                eprintln!("{name} {version} removed");
                Ok(())
            }
        }
    })
}

async fn push(
    target: &Target,
    file: &PathBuf,
    signature: Option<&PathBuf>,
    registry: impl FnOnce() -> Result<Arc<Registry>>,
) -> Result<()> {
    let name = DirectorySource::component_name(file)
        .with_context(|| format!("{}: expected a `<name>.wasm` file", file.display()))?
        .to_owned();
    // Checked here too: the name goes into the admin listener's path.
    check_name(&name)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let signature = signature.map(signature_text).transpose()?;
    let (record, outcome): (PushedRuleset, Pushed) = match target.via().await? {
        Via::Admin { url, token } => {
            let path = format!("/operator/rulesets/{name}");
            let body = send(
                &url,
                &token,
                "POST",
                &path,
                Some((&bytes, signature.as_deref())),
            )?;
            let record: PushedRuleset = serde_json::from_value(body["pushed"].clone())?;
            let outcome = match body["already_stored"].as_bool() {
                Some(true) => Pushed::AlreadyStored,
                _ => Pushed::Stored,
            };
            (record, outcome)
        }
        Via::Store(store) => {
            let registry = registry()?;
            let trusted = TrustedKeys::default();
            fleet::push(
                &store,
                &registry,
                &name,
                bytes,
                &operator(),
                signature,
                &trusted,
            )
            .await?
        }
    };
    match outcome {
        Pushed::Stored => eprintln!(
            "pushed {} {} ({} bytes, sha256 {}); `botgate ruleset activate {} {}` puts it in service",
            record.name, record.version, record.size, record.sha256, record.name, record.version
        ),
        Pushed::AlreadyStored => eprintln!(
            "{} {} was pushed already with the same content",
            record.name, record.version
        ),
    }
    Ok(())
}

async fn list(target: &Target) -> Result<()> {
    let listing = match target.via().await? {
        Via::Admin { url, token } => send(&url, &token, "GET", "/operator/rulesets", None)?,
        Via::Store(store) => {
            let listing = fleet::list(&store).await?;
            serde_json::json!({"pushed": listing.pushed, "states": listing.states})
        }
    };
    let pushed: Vec<PushedRuleset> = serde_json::from_value(listing["pushed"].clone())?;
    let states: BTreeMap<String, RulesetState> = serde_json::from_value(listing["states"].clone())?;
    if pushed.is_empty() {
        println!("no rule set pushed");
    }
    for record in &pushed {
        let state = states.get(&record.name);
        let mark = match state {
            Some(s) if s.active.as_deref() == Some(record.version.as_str()) => "active",
            Some(s)
                if s.shadow
                    .as_ref()
                    .is_some_and(|sh| sh.version == record.version) =>
            {
                "shadow"
            }
            _ => "",
        };
        println!(
            "{:<12} {:<12} {:<7} {:>9} bytes  sha256 {}  pushed by {}{}",
            record.name,
            record.version,
            mark,
            record.size,
            record.sha256.get(..12).unwrap_or(&record.sha256),
            record.pushed_by,
            if record.signature.is_some() {
                ", signed"
            } else {
                ""
            }
        );
    }
    if let Some(running) = listing["running"].as_object() {
        let mut line = "this gateway runs:".to_owned();
        for (name, entry) in running {
            line.push_str(&format!(
                " {name} {} ({})",
                entry["version"].as_str().unwrap_or("?"),
                entry["origin"].as_str().unwrap_or("?")
            ));
        }
        println!("{line}");
    }
    Ok(())
}

/// A shadow's results for a person: every pair, disagreements first, then samples.
fn describe_diff(name: &str, version: &str, results: &ShadowResults) -> String {
    let total: u64 = results.counts.values().sum();
    let agree = |pair: &str| pair.split_once(" -> ").is_some_and(|(a, b)| a == b);
    let disagreed: u64 = results
        .counts
        .iter()
        .filter(|(pair, _)| !agree(pair))
        .map(|(_, n)| n)
        .sum();
    let mut out = format!(
        "{name} {version} in shadow: {total} requests compared, {disagreed} with another category\n"
    );
    let mut pairs: Vec<(&String, &u64)> = results.counts.iter().collect();
    pairs.sort_by_key(|(pair, n)| (agree(pair), std::cmp::Reverse(**n)));
    out.push_str("  active -> shadow                              requests\n");
    for (pair, n) in pairs {
        let mark = if agree(pair) { " " } else { "*" };
        out.push_str(&format!("{mark} {pair:<44} {n:>8}\n"));
    }
    if !results.samples.is_empty() {
        out.push_str("latest disagreements (active | shadow):\n");
    }
    for sample in &results.samples {
        out.push_str(&format!(
            "  {} {} {} {}: {} | {}\n",
            httpdate::fmt_http_date(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(sample.at_ms)
            ),
            sample.website,
            sample.method,
            sample.target,
            sample.active,
            sample.shadow
        ));
    }
    out
}

fn print_state(name: &str, state: &RulesetState) {
    let previous = match state.previous.last() {
        Some(version) => format!("; rollback returns to {version}"),
        None => String::new(),
    };
    println!(
        "{name}: active {}{previous}",
        state.active.as_deref().unwrap_or("none")
    );
}
