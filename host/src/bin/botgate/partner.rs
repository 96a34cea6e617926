//! `botgate partner`: issue partner keys (shown once, stored as their SHA-256).

use crate::store::StoreArgs;
use anyhow::{Result, bail};
use botgate_api::keys::{new_partner_key, new_webhook_secret};
use botgate_model::PartnerName;
use botgate_store::{AccountStore, PartnerChange, PartnerRecord, key_digest};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum PartnerCommand {
    /// Create a partner and print its API key. The key is shown this once; the store
    /// keeps only its SHA-256.
    Create {
        /// The partner's name: 1 to 64 characters of a-z, 0-9, `_` and `-`.
        name: String,
        /// Give an existing partner a new key (the old key stops working).
        #[arg(long)]
        new_key: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub fn run(command: PartnerCommand) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match command {
            PartnerCommand::Create {
                name,
                new_key,
                store,
            } => create(&name, new_key, &store).await,
        }
    })
}

async fn create(name: &str, new_key: bool, args: &StoreArgs) -> Result<()> {
    let name = PartnerName::parse(name).map_err(|invalid| anyhow::anyhow!(invalid.message))?;
    let store = args.open().await?;
    let existing = store.partner(&name).await?;
    if existing.is_some() && !new_key {
        bail!(
            "partner `{}` exists; pass --new-key to replace its key",
            name.as_str()
        );
    }
    let key = new_partner_key()?;
    match existing {
        // Only the key is written: a webhook secret rotated meanwhile stays.
        Some(_) => {
            store
                .update_partner(
                    &name,
                    PartnerChange::Key {
                        key_sha256: key_digest(&key),
                    },
                )
                .await?;
        }
        None => {
            store
                .put_partner(&PartnerRecord {
                    name: name.clone(),
                    key_sha256: key_digest(&key),
                    webhook_secret: new_webhook_secret()?,
                })
                .await?;
        }
    }
    eprintln!(
        "partner `{}` in the {} store; its API key follows (shown once, keep it secret):",
        name.as_str(),
        args.config()
    );
    println!("{key}");
    Ok(())
}
