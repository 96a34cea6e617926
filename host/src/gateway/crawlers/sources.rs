//! Where crawler lists and networks are read from — a file or an http(s) URL — and the
//! network formats crawler operators publish.

use super::CrawlerListError;
use ipnet::IpNet;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The largest list or network document read.
const MAX_DOCUMENT_BYTES: u64 = 16 * 1024 * 1024;

/// A file path, or an `http://` / `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Url(String),
}

impl std::str::FromStr for Source {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Source, Self::Err> {
        let lower = text.to_ascii_lowercase();
        Ok(
            if lower.starts_with("http://") || lower.starts_with("https://") {
                Source::Url(text.to_owned())
            } else {
                Source::File(PathBuf::from(text))
            },
        )
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Url(url) => f.write_str(url),
        }
    }
}

impl Source {
    pub fn is_file(&self) -> bool {
        matches!(self, Source::File(_))
    }

    /// The document's text. Blocking: files are read, URLs fetched (30 s at most,
    /// certificates checked against the Web PKI, redirects followed up to 5 times).
    pub fn read(&self) -> Result<String, CrawlerListError> {
        let unreadable = |message: String| CrawlerListError::Unreadable {
            path: self.to_string(),
            message,
        };
        match self {
            Source::File(path) => {
                std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))
            }
            Source::Url(url) => {
                let agent = ureq::Agent::config_builder()
                    .timeout_global(Some(Duration::from_secs(30)))
                    .max_redirects(5)
                    .build()
                    .new_agent();
                let mut response = agent
                    .get(url)
                    .call()
                    .map_err(|e| unreadable(e.to_string()))?;
                response
                    .body_mut()
                    .with_config()
                    .limit(MAX_DOCUMENT_BYTES)
                    .read_to_string()
                    .map_err(|e| unreadable(e.to_string()))
            }
        }
    }
}

/// Google's and Bing's published shape.
#[derive(Deserialize)]
struct Prefixes {
    prefixes: Vec<Prefix>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Prefix {
    ipv4_prefix: Option<IpNet>,
    ipv6_prefix: Option<IpNet>,
}

/// The networks in `text`: a `{"prefixes": [{"ipv4Prefix": "…"}, {"ipv6Prefix": "…"}]}`
/// document, or one CIDR per line (`#` starts a comment).
pub fn networks(text: &str, source: &Source) -> Result<Vec<IpNet>, CrawlerListError> {
    let unreadable = |message: String| CrawlerListError::Unreadable {
        path: source.to_string(),
        message,
    };
    if text.trim_start().starts_with('{') {
        let document: Prefixes =
            serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?;
        return Ok(document
            .prefixes
            .into_iter()
            .flat_map(|p| p.ipv4_prefix.into_iter().chain(p.ipv6_prefix))
            .collect());
    }
    text.lines()
        .enumerate()
        .map(|(number, line)| (number, line.split('#').next().unwrap_or("").trim()))
        .filter(|(_, line)| !line.is_empty())
        .map(|(number, line)| {
            line.parse::<IpNet>()
                .or_else(|_| line.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| unreadable(format!("line {}: {line:?} is not a network", number + 1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_files_or_urls() {
        assert_eq!(
            "https://example.com/list.json".parse::<Source>().unwrap(),
            Source::Url("https://example.com/list.json".into())
        );
        assert!(
            "/etc/botgate/crawlers.json"
                .parse::<Source>()
                .unwrap()
                .is_file()
        );
    }

    #[test]
    fn published_networks_are_read() {
        let source = Source::File("googlebot.json".into());
        let google = r#"{"creationTime":"2026-11-20T00:00:00","prefixes":[
            {"ipv6Prefix":"2001:4860:4801:10::/64"},{"ipv4Prefix":"66.249.64.0/27"}]}"#;
        assert_eq!(
            networks(google, &source).unwrap(),
            vec![
                "2001:4860:4801:10::/64".parse::<IpNet>().unwrap(),
                "66.249.64.0/27".parse().unwrap()
            ]
        );
        let lines = "# crawlers\n10.0.0.0/8\n\n192.0.2.7 # one host\n";
        assert_eq!(networks(lines, &source).unwrap().len(), 2);
        let err = networks("10.0.0.0/8\nnot-a-network\n", &source).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(err.to_string().contains("googlebot.json"), "{err}");
    }
}
