//! What became of one request, as the access log and the metrics name it: enums on the
//! request path, their names only where a line or a label is written.

use botgate_model::Action;

/// What the gateway did with a request (the access log's and the metrics' `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Passed to the origin with no decision (protection off, or the website paused).
    Pass,
    /// The website's policy for the decided category.
    Grant,
    Deny,
    Captcha,
    /// A challenge answer that earned a pass, or did not.
    ChallengeSolved,
    ChallengeFailed,
    /// Over the client's own rate (429).
    Limited,
    /// Over the website's rate, with the share kept for pass holders used up (503).
    Busy,
    /// `force_https` or `force_subdomains_redirect` (301).
    Redirect,
    /// A method the gateway never forwards (`TRACE`, `CONNECT`; 405).
    Refused,
    /// A request that came back through the gateway (508).
    Loop,
    /// HTTP/3 for a website without it (421).
    Misdirected,
    /// A request the gateway could not read as one (400, 408), or whose target or
    /// headers are more than a protected website's components read (414, 431).
    BadRequest,
    /// A host name no website answers for (404).
    UnknownHost,
    /// An ACME CA's HTTP-01 request, answered by the gateway.
    AcmeChallenge,
    /// Monitoring mode: the policy's `deny` or `captcha`, not applied (passed to the
    /// origin).
    WouldDeny,
    WouldCaptcha,
}

impl Outcome {
    /// Every outcome, in declaration order (`ALL[outcome as usize] == outcome`).
    pub const ALL: [Outcome; 17] = [
        Outcome::Pass,
        Outcome::Grant,
        Outcome::Deny,
        Outcome::Captcha,
        Outcome::ChallengeSolved,
        Outcome::ChallengeFailed,
        Outcome::Limited,
        Outcome::Busy,
        Outcome::Redirect,
        Outcome::Refused,
        Outcome::Loop,
        Outcome::Misdirected,
        Outcome::BadRequest,
        Outcome::UnknownHost,
        Outcome::AcmeChallenge,
        Outcome::WouldDeny,
        Outcome::WouldCaptcha,
    ];

    /// The name in the access log and the metrics' `action` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Grant => "grant",
            Outcome::Deny => "deny",
            Outcome::Captcha => "captcha",
            Outcome::ChallengeSolved => "challenge_solved",
            Outcome::ChallengeFailed => "challenge_failed",
            Outcome::Limited => "limited",
            Outcome::Busy => "busy",
            Outcome::Redirect => "redirect",
            Outcome::Refused => "refused",
            Outcome::Loop => "loop",
            Outcome::Misdirected => "misdirected",
            Outcome::BadRequest => "bad_request",
            Outcome::UnknownHost => "unknown_host",
            Outcome::AcmeChallenge => "acme_challenge",
            Outcome::WouldDeny => "would_deny",
            Outcome::WouldCaptcha => "would_captcha",
        }
    }
}

impl Outcome {
    /// What monitoring mode records for the policy's `action` (which it does not apply).
    pub fn monitored(action: Action) -> Outcome {
        match action {
            Action::Grant => Outcome::Grant,
            Action::Deny => Outcome::WouldDeny,
            Action::Captcha => Outcome::WouldCaptcha,
        }
    }
}

impl From<Action> for Outcome {
    fn from(action: Action) -> Outcome {
        match action {
            Action::Grant => Outcome::Grant,
            Action::Deny => Outcome::Deny,
            Action::Captcha => Outcome::Captcha,
        }
    }
}

/// What the response cache said of a request (the access log's `cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheStatus {
    /// The website caches nothing of this request.
    NotAsked,
    Hit,
    Miss,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::NotAsked => "-",
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
        }
    }
}
