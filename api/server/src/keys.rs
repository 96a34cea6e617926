//! API keys and webhook secrets: generated from the operating system's random source,
//! shaped so a reader (and a secret scanner) can tell which is which.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// The prefix of partner keys.
pub const PARTNER_KEY_PREFIX: &str = "bgp_";
/// The prefix of user keys.
pub const USER_KEY_PREFIX: &str = "bgu_";
/// The prefix of dashboard session tokens.
pub const SESSION_PREFIX: &str = "bgs_";
/// Random bytes in every key and secret: 256 bits.
const KEY_BYTES: usize = 32;

/// The operating system's random source failed (it does not on Linux once booted).
#[derive(Debug, thiserror::Error)]
#[error("no randomness from the operating system: {0}")]
pub struct NoRandomness(getrandom::Error);

fn random() -> Result<[u8; KEY_BYTES], NoRandomness> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(NoRandomness)?;
    Ok(bytes)
}

/// A new partner key: `bgp_` and 256 random bits, URL-safe base64.
pub fn new_partner_key() -> Result<String, NoRandomness> {
    Ok(format!(
        "{PARTNER_KEY_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(random()?)
    ))
}

/// A new user key: `bgu_` and 256 random bits, URL-safe base64 (it travels in the
/// dashboard frame's query string).
pub fn new_user_key() -> Result<String, NoRandomness> {
    Ok(format!(
        "{USER_KEY_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(random()?)
    ))
}

/// A new dashboard session token: `bgs_` and 256 random bits, URL-safe base64.
pub fn new_session_token() -> Result<String, NoRandomness> {
    Ok(format!(
        "{SESSION_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(random()?)
    ))
}

/// A new webhook signing secret in the Standard Webhooks form: `whsec_` and base64.
pub fn new_webhook_secret() -> Result<String, NoRandomness> {
    Ok(format!("whsec_{}", STANDARD.encode(random()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_prefixed_and_url_safe() {
        let (a, b) = (new_user_key().unwrap(), new_user_key().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(USER_KEY_PREFIX));
        assert_eq!(a.len(), USER_KEY_PREFIX.len() + 43);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        assert!(new_partner_key().unwrap().starts_with(PARTNER_KEY_PREFIX));
        assert!(new_session_token().unwrap().starts_with(SESSION_PREFIX));
        assert!(new_webhook_secret().unwrap().starts_with("whsec_"));
    }
}
