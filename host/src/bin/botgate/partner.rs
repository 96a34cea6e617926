//! `botgate partner`, `botgate status` and `botgate reload`: the operator's commands,
//! carried out through a running gateway's admin listener (with the token it wrote into
//! the data directory) when it holds the embedded store, and on the store directly
//! otherwise (Redis, or an embedded store no gateway holds); `reload` always goes
//! through the admin listener.

use crate::store::{OPERATOR_TOKEN_FILE, StoreArgs};
use anyhow::{Context, Result, bail};
use botgate_host::operator::{self, Expiring};
use botgate_store::{AnyStore, WebsiteStore};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum PartnerCommand {
    /// Create a partner and print its API key. The key is shown this once; the store
    /// keeps only its SHA-256.
    Create {
        /// The partner's name: 1 to 64 characters of a-z, 0-9, `_` and `-`.
        name: String,
        /// Give an existing partner a new key instead (as `rotate`).
        #[arg(long)]
        new_key: bool,
        #[command(flatten)]
        target: Target,
    },
    /// List the partners.
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Give a partner a new key, printed once; the old one stops working at once.
    Rotate {
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// Revoke a partner's key: it stops working at once, and none works until a
    /// rotation. The partner's users and websites stay.
    Revoke {
        name: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Which gateway or store a command acts on.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// The configuration file whose store and admin listener to use (as `serve`'s;
    /// without it, /etc/botgate/botgate.toml when present).
    #[arg(long, env = "BOTGATE_CONFIG", value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// The admin listener of a gateway running on the embedded store, when the operator
    /// token it wrote into the data directory names none (it names its own); the token
    /// is sent only once the listener proved it holds it.
    #[arg(
        long,
        env = "BOTGATE_ADMIN_URL",
        default_value = "http://127.0.0.1:9180"
    )]
    pub(crate) admin_url: String,
}

/// How a command reaches its store.
pub(crate) enum Via {
    /// A running gateway's admin listener, with its operator token.
    Admin {
        url: String,
        token: String,
    },
    Store(AnyStore),
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(std::time::Duration::from_secs(2)))
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into()
}

/// The JSON answer of a request to the admin listener; its `error` as the error.
pub(crate) fn admin_answer(
    answer: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    url: &str,
) -> Result<serde_json::Value> {
    let mut answer = answer.with_context(|| format!("reaching the gateway at {url}"))?;
    let status = answer.status();
    let text = answer.body_mut().read_to_string().unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    if !status.is_success() {
        match body["error"].as_str() {
            Some(error) => bail!("{error}"),
            None => bail!("the gateway at {url} answered {status}"),
        }
    }
    Ok(body)
}

/// `GET` (or `POST`, with `post`) of `path` on the admin listener at `url` with the
/// operator's `token`; the JSON answer.
pub(crate) fn operator_call(
    url: &str,
    token: &str,
    path: &str,
    post: bool,
) -> Result<serde_json::Value> {
    let target = format!("{url}{path}");
    let authorization = format!("Bearer {token}");
    let answer = match post {
        true => agent()
            .post(target)
            .header("authorization", authorization)
            .send_empty(),
        false => agent()
            .get(target)
            .header("authorization", authorization)
            .call(),
    };
    admin_answer(answer, url)
}

impl Target {
    /// The admin listener, when a gateway that wrote its token there answers at it;
    /// the store otherwise.
    pub(crate) async fn via(&self) -> Result<Via> {
        self.store.check()?;
        if self.store.redis_url.is_none()
            && self.store.redis_sentinels.is_empty()
            && let Ok(Some((url, token))) = self.operator_gateway()
        {
            return Ok(Via::Admin { url, token });
        }
        Ok(Via::Store(self.store.open().await?))
    }

    /// The admin listener and token of the gateway that wrote the operator token into
    /// the data directory, if it still answers there: the address the file gives (else
    /// `--admin-url`), and only after the listener proved it holds the token, which is
    /// never sent before.
    fn operator_gateway(&self) -> Result<Option<(String, String)>> {
        let path = self.store.data_dir.join(OPERATOR_TOKEN_FILE);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the operator token {} (a running `botgate serve` writes it into \
                 its data directory: give --data-dir, or send the serve process SIGHUP, \
                 `systemctl reload botgate`)",
                path.display()
            )
        })?;
        let mut lines = text.lines().map(str::trim);
        let token = lines.next().unwrap_or_default().to_owned();
        let url = lines
            .next()
            .filter(|url| !url.is_empty())
            .unwrap_or(&self.admin_url)
            .trim_end_matches('/')
            .to_owned();
        Ok(holds_token(&url, &token).then_some((url, token)))
    }
}

/// Whether the admin listener at `url` proves it holds `token` (an HMAC of a fresh
/// challenge under it).
fn holds_token(url: &str, token: &str) -> bool {
    let mut random = [0u8; 16];
    if token.is_empty() || getrandom::fill(&mut random).is_err() {
        return false;
    }
    let challenge: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    let answer = agent()
        .get(format!("{url}/operator/proof"))
        .query("challenge", &challenge)
        .call();
    let Ok(mut answer) = answer else {
        return false;
    };
    let text = answer.body_mut().read_to_string().unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    answer.status().is_success()
        && body["proof"].as_str()
            == Some(botgate_host::gateway::admin::operator_proof(token, &challenge).as_str())
}

pub fn run(command: PartnerCommand) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (target, name, action) = match command {
            PartnerCommand::Create {
                name,
                new_key,
                target,
            } => (target, name, if new_key { "rotate" } else { "create" }),
            PartnerCommand::Rotate { name, target } => (target, name, "rotate"),
            PartnerCommand::Revoke { name, target } => (target, name, "revoke"),
            PartnerCommand::List { target } => {
                for name in list(&target).await? {
                    println!("{name}");
                }
                return Ok(());
            }
        };
        // Checked here too: the name goes into the admin listener's path.
        botgate_model::PartnerName::parse(&name)
            .map_err(|invalid| anyhow::anyhow!(invalid.message))?;
        let key = act(&target, &name, action).await?;
        let place = format!("the {} store", target.store.config());
        match key {
            Some(key) => {
                eprintln!(
                    "partner `{name}` in {place}; its API key follows (shown once, keep it secret):"
                );
                println!("{key}");
            }
            None => eprintln!("partner `{name}` in {place}: its key is revoked"),
        }
        Ok(())
    })
}

async fn list(target: &Target) -> Result<Vec<String>> {
    match target.via().await? {
        Via::Admin { url, token } => {
            let body = operator_call(&url, &token, "/operator/partners", false)?;
            Ok(serde_json::from_value(body["partners"].clone())?)
        }
        Via::Store(store) => Ok(operator::partner_names(&store).await?),
    }
}

/// Creates, rotates or revokes; the key to show, if any.
async fn act(target: &Target, name: &str, action: &str) -> Result<Option<String>> {
    match target.via().await? {
        Via::Admin { url, token } => {
            let path = format!("/operator/partners/{name}/{action}");
            let body = operator_call(&url, &token, &path, true)?;
            Ok(body["key"].as_str().map(str::to_owned))
        }
        Via::Store(store) => Ok(match action {
            "create" => Some(operator::create_partner(&store, name).await?),
            "rotate" => Some(operator::rotate_partner_key(&store, name).await?),
            _ => {
                operator::revoke_partner_key(&store, name).await?;
                None
            }
        }),
    }
}

/// `botgate reload`: asks the gateway answering at the admin URL to read its
/// configuration again.
pub fn reload(target: Target) -> Result<()> {
    let Some((url, token)) = target.operator_gateway()? else {
        bail!(
            "no gateway holding the operator token of {} answers at the address it gives \
             (or --admin-url)",
            target.store.data_dir.display()
        );
    };
    operator_call(&url, &token, "/operator/reload", true)?;
    eprintln!("the gateway at {url} reads its configuration again; its log says what changed");
    Ok(())
}

/// `botgate status`: the store, the snapshot, the components, expiring certificates.
pub fn status(target: Target) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let status = runtime.block_on(async {
        match target.via().await? {
            Via::Admin { url, token } => operator_call(&url, &token, "/operator/status", false),
            Via::Store(store) => direct_status(&target, &store).await,
        }
    })?;
    print!("{}", describe(&status));
    Ok(())
}

/// The status read from the store itself, with the components of a gateway answering
/// at the admin URL (on Redis, any gateway of the cluster).
async fn direct_status(target: &Target, store: &AnyStore) -> Result<serde_json::Value> {
    let config = target.store.config();
    let snapshot = store.snapshot().await?;
    let now_s = (botgate_webhooks::now_ms() / 1000) as i64;
    let expiring =
        operator::expiring_certificates(snapshot.websites.iter(), now_s, operator::EXPIRING_WITHIN);
    let url = target.admin_url.trim_end_matches('/');
    let health = admin_answer(agent().get(format!("{url}/health")).call(), url)
        .unwrap_or(serde_json::Value::Null);
    Ok(serde_json::json!({
        "store": {"backend": config.backend(), "address": config.address(), "reachable": true},
        "snapshot": {"version": snapshot.version, "websites": snapshot.websites.len()},
        "components": health["components"],
        "component_sources": health["component_sources"],
        "components_fail_closed": health["components_fail_closed"],
        "components_switched_off": health["components_switched_off"],
        "components_fail_closed_missing": health["components_fail_closed_missing"],
        "components_not_in_service": health["components_not_in_service"],
        "expiring_certificates": expiring,
    }))
}

/// The status as lines for a person.
fn describe(status: &serde_json::Value) -> String {
    let store = &status["store"];
    let mut out = format!(
        "store: {} ({}), {}\n",
        store["backend"].as_str().unwrap_or("?"),
        store["address"].as_str().unwrap_or("?"),
        match store["reachable"].as_bool() {
            Some(true) => "reachable".to_owned(),
            _ => format!(
                "UNREACHABLE for {} s",
                store["unreachable_for_seconds"].as_u64().unwrap_or(0)
            ),
        }
    );
    let snapshot = &status["snapshot"];
    out.push_str(&format!(
        "snapshot: version {}, {} websites{}\n",
        snapshot["version"],
        snapshot["websites"],
        snapshot["age_seconds"]
            .as_u64()
            .map(|age| format!(", confirmed {age} s ago"))
            .unwrap_or_default()
    ));
    match status["components"].as_object() {
        Some(components) => out.push_str(&format!(
            "components: {}\n",
            components
                .iter()
                .map(|(name, version)| {
                    let pushed = status["component_sources"][name] == "store";
                    format!(
                        "{name} {}{}",
                        version.as_str().unwrap_or("?"),
                        if pushed { " (pushed)" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => out.push_str("components: no gateway answers at the admin URL\n"),
    }
    for (key, what) in [
        ("components_fail_closed", "components failing closed"),
        (
            "components_fail_closed_missing",
            "components failing closed NOT LOADED (the requests they would judge are refused)",
        ),
        (
            "components_switched_off",
            "components SWITCHED OFF after failures",
        ),
    ] {
        let names: Vec<&str> = status[key]
            .as_array()
            .map(|names| names.iter().filter_map(|n| n.as_str()).collect())
            .unwrap_or_default();
        if !names.is_empty() {
            out.push_str(&format!("{what}: {}\n", names.join(", ")));
        }
    }
    for held in status["components_not_in_service"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let field = |key: &str| held[key].as_str().unwrap_or("?").to_owned();
        out.push_str(&format!(
            "component NOT IN SERVICE here: {} ({}): {}\n",
            field("name"),
            field("origin"),
            field("reason")
        ));
    }
    let expiring: Vec<Expiring> =
        serde_json::from_value(status["expiring_certificates"].clone()).unwrap_or_default();
    if expiring.is_empty() {
        out.push_str("certificates expiring within 14 days: none\n");
    }
    for certificate in expiring {
        out.push_str(&format!(
            "certificate of {} expires in {} days (at {})\n",
            certificate.domain,
            certificate.days_left,
            httpdate::fmt_http_date(
                std::time::UNIX_EPOCH
                    + std::time::Duration::from_secs(certificate.not_after.max(0) as u64)
            )
        ));
    }
    out
}
