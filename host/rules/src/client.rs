//! What the gateway learns of a client beyond its request: the TLS connection, the
//! crawler check, the challenge pass and the behaviour counters. The gateway's own
//! types; the facts builder ([`crate::facts`]) is the one place they become the
//! WIT contract's.

/// The negotiated TLS version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
    /// Anything older or unknown.
    Other,
}

/// The application protocol ALPN agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// None offered, or none agreed.
    None,
    Http11,
    H2,
    H3,
    Other,
}

/// The TLS connection a request arrived on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    pub version: TlsVersion,
    pub alpn: Alpn,
    /// The JA4 fingerprint of the ClientHello, empty when unknown.
    pub ja4: String,
}

/// The check of a user agent that claims to be a known crawler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrawlerCheck {
    /// The user agent claims no crawler the gateway knows how to check.
    #[default]
    NoClaim,
    /// The claim holds: a search engine's crawler.
    SearchEngine,
    /// The claim holds: a social network's link-preview fetcher.
    SocialNetwork,
    /// The claim was checked and does not hold.
    Failed,
    /// The check has not finished (reverse DNS under way).
    Pending,
}

/// The state of the challenge pass a request carries (the best of its pass cookies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PassState {
    #[default]
    None,
    /// Earned by the proof of work.
    Valid,
    /// Earned by the wait of a browser without JavaScript: shorter-lived.
    Waited,
    /// Genuine, and expired.
    Expired,
    /// Forged, or for another website or client.
    Invalid,
}

impl PassState {
    /// Whether the pass lets the client through a challenge.
    pub fn holds(self) -> bool {
        matches!(self, PassState::Valid | PassState::Waited)
    }

    /// How much a state tells, for choosing among several cookies.
    pub fn rank(self) -> u8 {
        match self {
            PassState::None => 0,
            PassState::Invalid => 1,
            PassState::Expired => 2,
            PassState::Waited => 3,
            PassState::Valid => 4,
        }
    }
}

/// A client's recent behaviour on one website, over a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BehaviourCounts {
    pub window_seconds: u32,
    /// Requests in the window, this one included.
    pub requests: u32,
    pub distinct_paths: u32,
    /// Challenges served and not solved since.
    pub failed_challenges: u32,
}

impl Default for BehaviourCounts {
    /// One request, as a client's first.
    fn default() -> Self {
        BehaviourCounts {
            window_seconds: 60,
            requests: 1,
            distinct_paths: 1,
            failed_challenges: 0,
        }
    }
}

/// Everything about the client the facts builder adds to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientFacts<'a> {
    pub tls: Option<&'a TlsInfo>,
    pub crawler: CrawlerCheck,
    pub pass: PassState,
    pub behaviour: BehaviourCounts,
}
