//! The user resource (the specification's subaccount) and the partner that owns it.

use crate::invalid::Invalid;
use crate::names::{self, UserId, validated_string};
use serde::{Deserialize, Serialize};

/// A partner's name, as the operator gives it to `botgate partner create`:
/// 1 to 64 bytes of `[a-z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PartnerName(String);

impl PartnerName {
    pub fn parse(input: &str) -> Result<PartnerName, Invalid> {
        let ok = (1..=64).contains(&input.len())
            && input
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !ok {
            return Err(Invalid::malformed(
                "name",
                format!(
                    "partner name `{}`: use 1 to 64 characters of a-z, 0-9, `_` and `-`",
                    names::shorten(input)
                ),
            ));
        }
        Ok(PartnerName(input.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

validated_string!(PartnerName);

/// A user as stored: its id, the partner that created it, and its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: UserId,
    /// The partner the user belongs to; only that partner reaches it.
    pub partner: PartnerName,
    /// The per-user key (dashboard frames, the user's own websites).
    pub api_key: String,
    pub tag: Vec<String>,
    pub server: Vec<String>,
}

impl User {
    /// A new user of `partner` with the key the caller generated.
    pub fn create(
        id: &str,
        partner: PartnerName,
        api_key: String,
        tag: Vec<String>,
    ) -> Result<User, Invalid> {
        Ok(User {
            id: UserId::parse(id)?,
            partner,
            api_key,
            tag: names::tags("tag", tag)?,
            server: Vec::new(),
        })
    }

    /// The user as the API shows it: `id`, `api_key`, `tag`, `server`.
    pub fn view(&self) -> UserView {
        UserView {
            id: self.id.as_str().to_owned(),
            api_key: self.api_key.clone(),
            tag: self.tag.clone(),
            server: self.server.clone(),
        }
    }
}

/// The user as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = User))]
pub struct UserView {
    pub id: String,
    pub api_key: String,
    pub tag: Vec<String>,
    pub server: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_user_shows_the_specification_fields() {
        let partner = PartnerName::parse("hoster").unwrap();
        let user = User::create("alice@example.com", partner, "k".repeat(43), vec![]).unwrap();
        let json = serde_json::to_value(user.view()).unwrap();
        assert_eq!(json["id"], "alice@example.com");
        assert_eq!(json["tag"], serde_json::json!([]));
        assert_eq!(json["server"], serde_json::json!([]));
        assert_eq!(json.as_object().unwrap().len(), 4);
    }

    #[test]
    fn partner_names_are_checked() {
        assert!(PartnerName::parse("acme-hosting").is_ok());
        assert!(PartnerName::parse("Acme").is_err());
        assert!(PartnerName::parse("").is_err());
    }
}
