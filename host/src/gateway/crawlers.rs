//! Verified bots: a user agent that claims a search engine or a social network is
//! checked against the networks its operator publishes (a bundled list, extended or
//! replaced by the operator's files). The answer goes to the rule components as the
//! contract's `crawler-verification`.

use crate::rules::bindings::CrawlerVerification;
use ipnet::IpNet;
use serde::Deserialize;
use std::net::IpAddr;
use std::path::PathBuf;

/// The bundled list.
const BUNDLED: &str = include_str!("assets/crawlers.json");

/// Where crawler lists come from besides the bundled one.
#[derive(Debug, Clone, Default)]
pub struct CrawlerConfig {
    /// Files in the bundled list's shape; an entry with the name of a bundled crawler
    /// replaces it, others are added.
    pub files: Vec<PathBuf>,
}

/// Why a crawler list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CrawlerListError {
    #[error("reading the crawler list {path}: {message}")]
    Unreadable { path: String, message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Kind {
    SearchEngine,
    SocialNetwork,
}

#[derive(Debug, Clone, Deserialize)]
struct Crawler {
    name: String,
    kind: Kind,
    user_agent_tokens: Vec<String>,
    networks: Vec<IpNet>,
    // `reverse_dns` (the suffixes a forward-confirmed reverse lookup must end in) is
    // in the data for the DNS check that comes next; unknown fields are ignored.
}

#[derive(Debug, Deserialize)]
struct CrawlerList {
    crawlers: Vec<Crawler>,
}

/// The crawlers the gateway knows how to verify.
pub struct Crawlers {
    crawlers: Vec<Crawler>,
}

fn parse(text: &str, origin: &str) -> Result<Vec<Crawler>, CrawlerListError> {
    let list: CrawlerList =
        serde_json::from_str(text).map_err(|err| CrawlerListError::Unreadable {
            path: origin.to_owned(),
            message: err.to_string(),
        })?;
    Ok(list
        .crawlers
        .into_iter()
        .map(|mut c| {
            for token in &mut c.user_agent_tokens {
                *token = token.to_ascii_lowercase();
            }
            c
        })
        .collect())
}

impl Crawlers {
    pub fn new(config: CrawlerConfig) -> Result<Crawlers, CrawlerListError> {
        let mut crawlers = parse(BUNDLED, "the bundled list")?;
        for path in &config.files {
            let text =
                std::fs::read_to_string(path).map_err(|err| CrawlerListError::Unreadable {
                    path: path.display().to_string(),
                    message: err.to_string(),
                })?;
            for crawler in parse(&text, &path.display().to_string())? {
                crawlers.retain(|c| c.name != crawler.name);
                crawlers.push(crawler);
            }
        }
        Ok(Crawlers { crawlers })
    }

    /// The crawler `user_agent` claims to be, if any.
    fn claimed(&self, user_agent: &[u8]) -> Option<&Crawler> {
        let lower = user_agent.to_ascii_lowercase();
        let lower = String::from_utf8_lossy(&lower);
        self.crawlers.iter().find(|c| {
            c.user_agent_tokens
                .iter()
                .any(|token| lower.contains(token.as_str()))
        })
    }

    /// Checks the claim `user_agent` makes for a client at `client`.
    pub fn verify(&self, user_agent: Option<&[u8]>, client: IpAddr) -> CrawlerVerification {
        let Some(crawler) = user_agent.and_then(|ua| self.claimed(ua)) else {
            return CrawlerVerification::NoClaim;
        };
        if crawler.networks.iter().any(|net| net.contains(&client)) {
            match crawler.kind {
                Kind::SearchEngine => CrawlerVerification::VerifiedSearchEngine,
                Kind::SocialNetwork => CrawlerVerification::VerifiedSocialNetwork,
            }
        } else {
            CrawlerVerification::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_checked_against_published_networks() {
        let c = Crawlers::new(CrawlerConfig::default()).unwrap();
        let google = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        assert!(matches!(
            c.verify(Some(google), "66.249.66.1".parse().unwrap()),
            CrawlerVerification::VerifiedSearchEngine
        ));
        assert!(matches!(
            c.verify(Some(google), "203.0.113.5".parse().unwrap()),
            CrawlerVerification::Failed
        ));
        assert!(matches!(
            c.verify(
                Some(b"facebookexternalhit/1.1"),
                "69.63.176.10".parse().unwrap()
            ),
            CrawlerVerification::VerifiedSocialNetwork
        ));
        assert!(matches!(
            c.verify(
                Some(b"Mozilla/5.0 Firefox/130.0"),
                "66.249.66.1".parse().unwrap()
            ),
            CrawlerVerification::NoClaim
        ));
    }

    #[test]
    fn operator_files_replace_bundled_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("local.json");
        std::fs::write(
            &file,
            r#"{"crawlers":[{"name":"googlebot","kind":"search-engine",
                "user_agent_tokens":["Googlebot"],"networks":["127.0.0.0/8"]}]}"#,
        )
        .unwrap();
        let c = Crawlers::new(CrawlerConfig { files: vec![file] }).unwrap();
        assert!(matches!(
            c.verify(Some(b"Googlebot/2.1"), "127.0.0.1".parse().unwrap()),
            CrawlerVerification::VerifiedSearchEngine
        ));
        assert!(matches!(
            c.verify(Some(b"Googlebot/2.1"), "66.249.66.1".parse().unwrap()),
            CrawlerVerification::Failed
        ));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        let err = Crawlers::new(CrawlerConfig { files: vec![bad] })
            .err()
            .unwrap();
        assert!(err.to_string().contains("bad.json"), "{err}");
    }
}
