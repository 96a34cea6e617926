//! Verified bots: a user agent that claims a search engine or a social network is
//! checked against the networks its operator publishes and, outside them, by
//! forward-confirmed reverse DNS against the operator's host-name suffixes
//! ([`reverse_dns`]). The lists come bundled and from the operator's files or URLs
//! ([`sources`]), refreshed periodically. The answer goes to the rule components as the
//! contract's `crawler-verification`.

pub mod reverse_dns;
pub mod sources;

use crate::client::CrawlerCheck;
use crate::recent::PerThread;
use aho_corasick::AhoCorasick;
use arc_swap::ArcSwap;
use ipnet::IpNet;
use reverse_dns::{ReverseDns, ReverseDnsConfig};
use serde::Deserialize;
use sources::Source;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// The bundled list.
const BUNDLED: &str = include_str!("../assets/crawlers.json");

/// Where crawler lists come from besides the bundled one, and how claims are checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrawlerConfig {
    /// Lists in the bundled list's shape (files or http(s) URLs); an entry with the name
    /// of a known crawler replaces it, others are added.
    pub lists: Vec<Source>,
    /// `(crawler name, source)`: the networks a crawler's operator publishes (Google's
    /// and Bing's `{"prefixes": [{"ipv4Prefix": …}]}` JSON, or one CIDR per line),
    /// replacing that crawler's listed networks.
    pub networks: Vec<(String, Source)>,
    /// How often the lists and networks are read again; never when zero.
    pub refresh: Duration,
    pub reverse_dns: ReverseDnsConfig,
}

/// Why crawler lists could not be read or the resolver set up.
#[derive(Debug, thiserror::Error)]
pub enum CrawlerListError {
    #[error("reading the crawler list {path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("--crawler-networks names {0}, which no crawler list has")]
    UnknownCrawler(String),
    #[error("the crawlers' user-agent tokens cannot be searched for: {0}")]
    Tokens(String),
    #[error(transparent)]
    Resolver(#[from] reverse_dns::ResolverError),
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
    #[serde(default)]
    networks: Vec<IpNet>,
    /// Host-name suffixes a forward-confirmed reverse lookup must end in.
    #[serde(default)]
    reverse_dns: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct CrawlerList {
    crawlers: Vec<Crawler>,
}

/// A built list: the crawlers, and one automaton over all their user-agent tokens, so a
/// request's user agent is scanned once, without a lower-case copy.
struct Known {
    crawlers: Vec<Crawler>,
    tokens: AhoCorasick,
    /// The crawler (index into `crawlers`) of each token of `tokens`.
    owner: Vec<usize>,
    /// Each thread's recent claims (the crawler, or none) by user agent: most requests
    /// come from a few user agents, and the claim depends on nothing else. A new list
    /// is a new `Known`, so a refresh starts with an empty memory.
    recent_claims: PerThread<Option<usize>>,
}

impl Known {
    fn new(crawlers: Vec<Crawler>) -> Result<Known, CrawlerListError> {
        let (owner, tokens): (Vec<usize>, Vec<&str>) = crawlers
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.user_agent_tokens.iter().map(move |t| (i, t.as_str())))
            .unzip();
        // A few hundred bytes of tokens: a full DFA is small and the fastest to run.
        let tokens = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(tokens)
            .map_err(|err| CrawlerListError::Tokens(err.to_string()))?;
        Ok(Known {
            crawlers,
            tokens,
            owner,
            recent_claims: PerThread::for_user_agents(),
        })
    }

    /// The first crawler, in list order, one of whose tokens occurs in `user_agent`
    /// (ignoring ASCII case).
    fn claimed(&self, user_agent: &[u8]) -> Option<&Crawler> {
        let claim = match std::str::from_utf8(user_agent) {
            Ok(text) => {
                let recent = self.recent_claims.here();
                let known = recent.borrow().get(text).copied();
                known.unwrap_or_else(|| {
                    let claim = self.scan(user_agent);
                    recent.borrow_mut().put(text, claim);
                    claim
                })
            }
            Err(_) => self.scan(user_agent),
        };
        claim.map(|i| &self.crawlers[i])
    }

    /// The claim of `user_agent` by the automaton: the first crawler in list order.
    fn scan(&self, user_agent: &[u8]) -> Option<usize> {
        // Most user agents claim nothing: one unanchored search (with the automaton's
        // prefilter) says so before the overlapping search that ranks claims.
        if !self.tokens.is_match(user_agent) {
            return None;
        }
        self.tokens
            .find_overlapping_iter(user_agent)
            .map(|found| self.owner[found.pattern().as_usize()])
            .min()
    }
}

/// A configuration's crawler list, read ahead of [`Crawlers::install`].
pub struct CrawlersRead {
    list: Known,
    config: CrawlerConfig,
}

/// The crawlers the gateway knows how to verify.
pub struct Crawlers {
    /// The list in use and the configuration it was read with, swapped together.
    current: ArcSwap<CrawlersRead>,
    dns: ReverseDns,
    /// Told when a reload installs a configuration (its refresh period may differ).
    reconfigured: Arc<tokio::sync::Notify>,
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

/// Builds the whole list from the bundled one and the configured sources. A source
/// that cannot be read fails the build when `strict`; otherwise it is skipped with a
/// warning.
fn build(config: &CrawlerConfig, strict: bool) -> Result<Known, CrawlerListError> {
    let mut crawlers = parse(BUNDLED, "the bundled list")?;
    let skip = |err: CrawlerListError| {
        if strict {
            Err(err)
        } else {
            tracing::warn!(%err, "skipping a crawler source");
            Ok(())
        }
    };
    for source in &config.lists {
        match source
            .read()
            .and_then(|text| parse(&text, &source.to_string()))
        {
            Ok(list) => {
                for crawler in list {
                    crawlers.retain(|c| c.name != crawler.name);
                    crawlers.push(crawler);
                }
            }
            Err(err) => skip(err)?,
        }
    }
    for (name, source) in &config.networks {
        let Some(crawler) = crawlers.iter_mut().find(|c| &c.name == name) else {
            skip(CrawlerListError::UnknownCrawler(name.clone()))?;
            continue;
        };
        match source
            .read()
            .and_then(|text| sources::networks(&text, source))
        {
            Ok(networks) => crawler.networks = networks,
            Err(err) => skip(err)?,
        }
    }
    Known::new(crawlers)
}

/// The list a configuration starts with: files must be readable, and so must the
/// crawler names given be known, unless they may come from a list behind a URL; a URL
/// that cannot be fetched now is skipped.
fn first_build(config: &CrawlerConfig) -> Result<Known, CrawlerListError> {
    let lists_are_files = config.lists.iter().all(Source::is_file);
    let files = CrawlerConfig {
        lists: config
            .lists
            .iter()
            .filter(|s| s.is_file())
            .cloned()
            .collect(),
        networks: config
            .networks
            .iter()
            .filter(|(_, s)| s.is_file() && lists_are_files)
            .cloned()
            .collect(),
        ..config.clone()
    };
    build(&files, true)?;
    build(config, false)
}

impl Crawlers {
    /// The crawlers of the bundled list and `config`'s sources. Files must be readable;
    /// a URL that cannot be fetched now is skipped (and tried again at each refresh).
    pub fn new(config: CrawlerConfig) -> Result<Crawlers, CrawlerListError> {
        let list = first_build(&config)?;
        Ok(Crawlers {
            current: ArcSwap::from_pointee(CrawlersRead {
                list,
                config: config.clone(),
            }),
            dns: ReverseDns::new(config.reverse_dns.clone())?,
            reconfigured: Arc::default(),
        })
    }

    /// Reads `config`'s lists and networks as [`Crawlers::new`] does, for
    /// [`Crawlers::install`]. Blocking (files, HTTP): call it off the request threads.
    pub fn read(config: CrawlerConfig) -> Result<CrawlersRead, CrawlerListError> {
        Ok(CrawlersRead {
            list: first_build(&config)?,
            config,
        })
    }

    /// Whether `config` is the configuration in force.
    pub fn configured_with(&self, config: &CrawlerConfig) -> bool {
        self.current.load().config == *config
    }

    /// Takes the lists, networks and refresh period read (the reverse-DNS servers stay
    /// the ones the gateway started with).
    pub fn install(&self, read: CrawlersRead) {
        tracing::info!(
            crawlers = read.list.crawlers.len(),
            "crawler lists reloaded"
        );
        self.current.store(Arc::new(read));
        self.reconfigured.notify_waiters();
    }

    /// How often the sources are read again (zero: never).
    pub fn refresh_every(&self) -> Duration {
        self.current.load().config.refresh
    }

    /// Reads every source again; keeps the current list when one cannot be read.
    /// Blocking (files, HTTP): call it off the request threads.
    pub fn refresh(&self) {
        let before = self.current.load_full();
        match build(&before.config, true) {
            Ok(list) => {
                let count = list.crawlers.len();
                let refreshed = Arc::new(CrawlersRead {
                    list,
                    config: before.config.clone(),
                });
                // A reload that installed another configuration meanwhile wins.
                let previous = self.current.compare_and_swap(&before, refreshed);
                if Arc::ptr_eq(&*previous, &before) {
                    tracing::info!(crawlers = count, "crawler lists refreshed");
                }
            }
            Err(err) => tracing::warn!(%err, "crawler lists not refreshed; keeping the last ones"),
        }
    }

    /// Notified when a reload installs a configuration.
    pub fn reconfigurations(&self) -> Arc<tokio::sync::Notify> {
        self.reconfigured.clone()
    }

    /// Checks the claim `user_agent` makes for a client at `client`.
    pub async fn verify(&self, user_agent: Option<&[u8]>, client: IpAddr) -> CrawlerCheck {
        let Some(user_agent) = user_agent else {
            return CrawlerCheck::NoClaim;
        };
        let (kind, suffixes) = {
            let current = self.current.load();
            let list = &current.list;
            let Some(crawler) = list.claimed(user_agent) else {
                return CrawlerCheck::NoClaim;
            };
            if crawler.networks.iter().any(|net| net.contains(&client)) {
                return verified(crawler.kind);
            }
            if crawler.reverse_dns.is_empty() {
                return CrawlerCheck::Failed;
            }
            (crawler.kind, crawler.reverse_dns.clone())
        };
        let names = self.dns.confirmed_names(client).await;
        let confirmed = names.iter().any(|name| {
            suffixes
                .iter()
                .any(|suffix| reverse_dns::under(name, suffix))
        });
        if confirmed {
            verified(kind)
        } else {
            CrawlerCheck::Failed
        }
    }
}

fn verified(kind: Kind) -> CrawlerCheck {
    match kind {
        Kind::SearchEngine => CrawlerCheck::SearchEngine,
        Kind::SocialNetwork => CrawlerCheck::SocialNetwork,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration whose DNS server answers nothing, at once.
    fn without_dns(lists: Vec<Source>) -> CrawlerConfig {
        CrawlerConfig {
            lists,
            reverse_dns: ReverseDnsConfig {
                servers: vec!["127.0.0.1:1".parse().unwrap()],
                timeout: Duration::from_millis(200),
                ..ReverseDnsConfig::default()
            },
            ..CrawlerConfig::default()
        }
    }

    /// What a claim was before the automaton: the first crawler in list order with a
    /// token in the lower-cased user agent.
    fn claimed_by_substring<'a>(known: &'a Known, user_agent: &str) -> Option<&'a str> {
        let lower = user_agent.to_ascii_lowercase();
        known
            .crawlers
            .iter()
            .find(|c| {
                c.user_agent_tokens
                    .iter()
                    .any(|t| lower.contains(t.as_str()))
            })
            .map(|c| c.name.as_str())
    }

    #[test]
    fn the_token_automaton_names_the_claim_a_substring_search_names() {
        let known = build(&CrawlerConfig::default(), true).unwrap();
        let mut user_agents: Vec<String> = known
            .crawlers
            .iter()
            .flat_map(|c| c.user_agent_tokens.iter())
            .flat_map(|t| {
                [
                    format!("Mozilla/5.0 (compatible; {t}/2.1)"),
                    t.to_ascii_uppercase(),
                    // Two claims at once: list order decides, not position.
                    format!("{t} and {}", known.crawlers[0].user_agent_tokens[0]),
                    format!(
                        "{} and {t}",
                        known.crawlers.last().unwrap().user_agent_tokens[0]
                    ),
                ]
            })
            .collect();
        user_agents.extend(
            [
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
                "",
                "curl/8.5.0",
            ]
            .map(String::from),
        );
        let mut claims = 0;
        for user_agent in &user_agents {
            let expected = claimed_by_substring(&known, user_agent);
            // Scanned, then (the same user agent at once again) remembered.
            for pass in ["scanned", "remembered"] {
                let got = known
                    .claimed(user_agent.as_bytes())
                    .map(|c| c.name.as_str());
                assert_eq!(got, expected, "{pass}: {user_agent:?}");
            }
            let remembered = known.recent_claims.here().borrow().get(user_agent).copied();
            let remembered = remembered.map(|claim| claim.map(|i| known.crawlers[i].name.as_str()));
            if user_agent.len() <= 512 {
                assert_eq!(remembered, Some(expected), "{user_agent:?} is remembered");
            }
            claims += usize::from(expected.is_some());
        }
        assert!(claims > known.crawlers.len(), "the cases make claims");
        // A user agent that is not UTF-8 is scanned every time, never remembered.
        let mut latin1 = b"Googlebot/2.1 caf\xe9".to_vec();
        assert_eq!(
            known.claimed(&latin1).map(|c| c.name.as_str()),
            Some("googlebot")
        );
        latin1[0] = b'X';
        assert_eq!(known.claimed(&latin1).map(|c| c.name.as_str()), None);
        assert!(
            known
                .claimed(b"Mozilla/5.0 (X11; Linux x86_64) Firefox/133.0")
                .is_none()
        );
    }

    #[tokio::test]
    async fn claims_are_checked_against_published_networks() {
        let c = Crawlers::new(without_dns(Vec::new())).unwrap();
        let google = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        assert!(matches!(
            c.verify(Some(google), "66.249.66.1".parse().unwrap()).await,
            CrawlerCheck::SearchEngine
        ));
        assert!(matches!(
            c.verify(Some(google), "203.0.113.5".parse().unwrap()).await,
            CrawlerCheck::Failed
        ));
        assert!(matches!(
            c.verify(
                Some(b"facebookexternalhit/1.1"),
                "69.63.176.10".parse().unwrap()
            )
            .await,
            CrawlerCheck::SocialNetwork
        ));
        assert!(matches!(
            c.verify(
                Some(b"Mozilla/5.0 Firefox/130.0"),
                "66.249.66.1".parse().unwrap()
            )
            .await,
            CrawlerCheck::NoClaim
        ));
    }

    #[tokio::test]
    async fn operator_files_replace_bundled_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("local.json");
        std::fs::write(
            &file,
            r#"{"crawlers":[{"name":"googlebot","kind":"search-engine",
                "user_agent_tokens":["Googlebot"],"networks":["127.0.0.0/8"]}]}"#,
        )
        .unwrap();
        let c = Crawlers::new(without_dns(vec![Source::File(file)])).unwrap();
        assert!(matches!(
            c.verify(Some(b"Googlebot/2.1"), "127.0.0.1".parse().unwrap())
                .await,
            CrawlerCheck::SearchEngine
        ));
        assert!(matches!(
            c.verify(Some(b"Googlebot/2.1"), "66.249.66.1".parse().unwrap())
                .await,
            CrawlerCheck::Failed
        ));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        let err = Crawlers::new(without_dns(vec![Source::File(bad)]))
            .err()
            .unwrap();
        assert!(err.to_string().contains("bad.json"), "{err}");
        let mut unknown = without_dns(Vec::new());
        unknown.networks = vec![("nobot".into(), Source::File(dir.path().join("x")))];
        let err = Crawlers::new(unknown).err().unwrap();
        assert!(err.to_string().contains("nobot"), "{err}");
    }

    #[tokio::test]
    async fn published_networks_replace_a_crawlers_networks_and_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bingbot.json");
        std::fs::write(&file, r#"{"prefixes":[{"ipv4Prefix":"127.0.0.0/8"}]}"#).unwrap();
        let mut config = without_dns(Vec::new());
        config.networks = vec![("bingbot".into(), Source::File(file.clone()))];
        let c = Crawlers::new(config).unwrap();
        let bing = Some(&b"Mozilla/5.0 (compatible; bingbot/2.0)"[..]);
        let local = "127.0.0.1".parse().unwrap();
        assert!(matches!(
            c.verify(bing, local).await,
            CrawlerCheck::SearchEngine
        ));
        std::fs::write(&file, r#"{"prefixes":[{"ipv4Prefix":"192.0.2.0/24"}]}"#).unwrap();
        c.refresh();
        assert!(matches!(c.verify(bing, local).await, CrawlerCheck::Failed));
        // A broken document keeps the last good list.
        std::fs::write(&file, "{").unwrap();
        c.refresh();
        assert!(matches!(
            c.verify(bing, "192.0.2.1".parse().unwrap()).await,
            CrawlerCheck::SearchEngine
        ));
    }
}
