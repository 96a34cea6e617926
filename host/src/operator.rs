//! What an operator does to a gateway's store and asks of a running gateway, the same
//! from the command line (on Redis, or on the embedded store while no gateway holds
//! it) and through the admin listener (while one does): partners — create, list,
//! rotate a key, revoke it — and the gateway's status.

use botgate_api::keys::{NoRandomness, new_partner_key, new_webhook_secret};
use botgate_model::PartnerName;
use botgate_model::certificate::leaf_summary;
use botgate_store::{
    AccountStore, PartnerChange, PartnerRecord, StoreError, WebsiteRecord, key_digest,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Certificates that expire within this are listed by the status.
pub const EXPIRING_WITHIN: Duration = Duration::from_secs(14 * 24 * 3600);

/// Why an operator's request failed.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("{0}")]
    InvalidName(String),
    #[error("partner `{0}` exists; `botgate partner rotate {0}` gives it a new key")]
    Exists(String),
    #[error("no partner `{0}`")]
    NoSuchPartner(String),
    #[error("the store")]
    Store(#[from] StoreError),
    #[error("generating a key")]
    Random(#[from] NoRandomness),
}

fn name(name: &str) -> Result<PartnerName, OperatorError> {
    PartnerName::parse(name).map_err(|invalid| OperatorError::InvalidName(invalid.message))
}

/// Creates the partner `partner`; its API key, to be shown once (the store keeps only
/// its SHA-256).
pub async fn create_partner<S: AccountStore>(
    store: &S,
    partner: &str,
) -> Result<String, OperatorError> {
    let partner = name(partner)?;
    let key = new_partner_key()?;
    let created = store
        .create_partner(&PartnerRecord {
            name: partner.clone(),
            key_sha256: key_digest(&key),
            webhook_secret: new_webhook_secret()?,
            frame_origins: Vec::new(),
        })
        .await;
    match created {
        Err(StoreError::Conflict(_)) => Err(OperatorError::Exists(partner.as_str().to_owned())),
        created => Ok(created.map(|()| key)?),
    }
}

/// Gives `partner` a new key, shown once; the old one stops working at once.
pub async fn rotate_partner_key<S: AccountStore>(
    store: &S,
    partner: &str,
) -> Result<String, OperatorError> {
    let key = new_partner_key()?;
    replace_key(store, partner, &key).await?;
    Ok(key)
}

/// Revokes `partner`'s key: it stops working at once, and no key works until a
/// rotation; the partner's users, websites and webhook secret stay.
pub async fn revoke_partner_key<S: AccountStore>(
    store: &S,
    partner: &str,
) -> Result<(), OperatorError> {
    // A key nobody is ever shown.
    replace_key(store, partner, &new_partner_key()?).await
}

async fn replace_key<S: AccountStore>(
    store: &S,
    partner: &str,
    key: &str,
) -> Result<(), OperatorError> {
    let partner = name(partner)?;
    // Only the key is written: a webhook secret rotated meanwhile stays.
    match store
        .update_partner(
            &partner,
            PartnerChange::Key {
                key_sha256: key_digest(key),
            },
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound(_)) => {
            Err(OperatorError::NoSuchPartner(partner.as_str().to_owned()))
        }
        Err(err) => Err(err.into()),
    }
}

/// Every partner's name, in order.
pub async fn partner_names<S: AccountStore>(store: &S) -> Result<Vec<String>, OperatorError> {
    Ok(store
        .partners()
        .await?
        .into_iter()
        .map(|partner| partner.name.as_str().to_owned())
        .collect())
}

/// A website certificate that expires soon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiring {
    pub domain: String,
    /// Seconds since the Unix epoch.
    pub not_after: i64,
    /// Whole days left (negative once expired).
    pub days_left: i64,
}

/// The websites of `websites` whose certificate expires within `within` of `now_s`,
/// soonest first.
pub fn expiring_certificates<'a>(
    websites: impl Iterator<Item = &'a WebsiteRecord>,
    now_s: i64,
    within: Duration,
) -> Vec<Expiring> {
    let limit = now_s + within.as_secs() as i64;
    let mut expiring: Vec<Expiring> = websites
        .filter_map(|record| {
            let certificate = record.website.certificate.as_ref()?;
            let not_after = leaf_summary(&certificate.public)?.not_after;
            (not_after <= limit).then(|| Expiring {
                domain: record.website.domain.as_str().to_owned(),
                not_after,
                days_left: (not_after - now_s).div_euclid(24 * 3600),
            })
        })
        .collect();
    expiring.sort_by_key(|expiring| (expiring.not_after, expiring.domain.clone()));
    expiring
}
