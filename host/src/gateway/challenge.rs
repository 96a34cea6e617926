//! The built-in challenge: a proof-of-work page (with a server-enforced wait for
//! clients without JavaScript) and the signed pass cookie a solved challenge earns.
//!
//! Everything is signed with one cluster-wide secret (kept in the store, so every
//! gateway of a cluster accepts what another issued):
//!
//! - a **challenge token** `v2.<issued>.<difficulty>.<wait>.<nonce>.<mac>` names the
//!   website, the client, the time it was issued, the difficulty (raised while the
//!   website is under pressure) and the wait; the client must find a `counter` such that
//!   `SHA-256("<token>:<counter>")` starts with `difficulty` zero bits;
//! - the **wait** fallback (inside `<noscript>`) is answered by sending the token back
//!   once `wait` whole seconds have passed since it was issued (at least as long as the
//!   work takes a browser, doubling with each extra bit of difficulty, at most half a
//!   token's life); it earns a shorter *waited* pass, which rule components see as such,
//!   and a client gets only so many an hour on one website
//!   ([`super::ChallengeLedger::count_wait`]);
//! - the **pass** cookie `<expires>.<mac>` (`w<expires>.<mac>` when waited) is bound to
//!   the website (its domain, so its listed subdomains share it) and to the client (its
//!   IPv4 address, or its IPv6 /64), and expires. Over HTTPS it is `botgate_pass`, marked
//!   `Secure`; over plain HTTP it is `botgate_pass_plain`, because a browser holding a
//!   `Secure` cookie refuses a plain-HTTP cookie of the same name (RFC 6265bis §5.7), and
//!   a visitor would be challenged in a loop.
//!
//! A token gives one pass: once answered it is spent, in the store, for every gateway
//! ([`StoreLedger`]). A page that starts several requests at once gets several
//! challenges, and solving any one of them earns the pass the others then see, so
//! parallel requests from one client never loop.

use crate::client::PassState;
use crate::recent::PerThread;
use arc_swap::ArcSwap;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use botgate_model::report::Report;
use hmac::{Hmac, Mac};
use http::header::COOKIE;
use http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::sync::LazyLock;
use std::time::Duration;

/// The path the challenge form posts to, on every website.
pub const VERIFY_PATH: &str = "/.botgate/challenge";
/// The most pass cookies of one request checked by their HMAC (those this thread
/// verified lately are always recognised): a browser sends one, or a few with passes
/// for parent paths or domains, and a header packed with thousands would cost an HMAC
/// each.
const MAX_PASSES_CHECKED: usize = 8;
/// The pass cookie's name over HTTPS (where it is `Secure`).
pub const PASS_COOKIE: &str = "botgate_pass";
/// The pass cookie's name over plain HTTP.
pub const PLAIN_PASS_COOKIE: &str = "botgate_pass_plain";
/// The most difficulty a token may ask for (about 4·10^9 hashes).
const MAX_DIFFICULTY: u8 = 32;
/// The name the secret is kept under in the store.
pub const SECRET_NAME: &str = "challenge-pass";

/// How a challenge behaves.
#[derive(Debug, Clone)]
pub struct ChallengeConfig {
    /// Leading zero bits the proof of work must reach (each bit doubles the work; 16 is
    /// about 65 000 hashes, under a second or two in a browser).
    pub difficulty: u8,
    /// Bits added to the difficulty while the website is under attack (or over its
    /// rate); the wait doubles with each.
    pub attack_extra_bits: u8,
    /// How long a solved challenge lets the client pass.
    pub pass_lifetime: Duration,
    /// How long a challenge may take to solve.
    pub solve_within: Duration,
    /// How long a client without JavaScript waits at the base difficulty: at least as
    /// long as the work takes a typical browser.
    pub wait: Duration,
    /// How long a waited pass lets the client pass.
    pub waited_pass_lifetime: Duration,
    /// Waited passes one client (IPv4 address or IPv6 /64) gets per hour.
    pub waits_per_client_per_hour: u32,
}

impl Default for ChallengeConfig {
    fn default() -> Self {
        ChallengeConfig {
            difficulty: 16,
            attack_extra_bits: 3,
            pass_lifetime: Duration::from_secs(3600),
            solve_within: Duration::from_secs(300),
            wait: Duration::from_secs(5),
            waited_pass_lifetime: Duration::from_secs(600),
            waits_per_client_per_hour: 12,
        }
    }
}

/// How a pass was earned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// By the proof of work.
    Work,
    /// By the wait of the page for browsers without JavaScript.
    Waited,
}

impl PassKind {
    /// What the pass's MAC covers first, so one kind's MAC is never another's.
    fn label(self) -> &'static str {
        match self {
            PassKind::Work => "pass",
            PassKind::Waited => "waited pass",
        }
    }
}

/// Why a submitted answer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the challenge form is incomplete or malformed")]
    Malformed,
    #[error("the challenge was issued for another website or client, or was altered")]
    Forged,
    #[error("the challenge is too old; a new one was issued")]
    Expired,
    #[error("the proof of work does not reach the difficulty")]
    WrongWork,
    #[error("the wait is not over yet")]
    TooFast,
    #[error("this challenge was answered already")]
    Spent,
    #[error("this address has had its passes without JavaScript on this website for this hour")]
    TooManyWaits,
}

/// Store-backed [`super::ChallengeLedger`]: a token is spent by taking a lease on its
/// digest in the store until it would expire anyway, so it gives one pass across a
/// cluster; waits are counted per client in an hour's window. While the store cannot
/// be reached, neither is checked (a warning is logged): a challenge is never failed
/// for the store's sake.
pub struct StoreLedger<S> {
    store: std::sync::Arc<S>,
}

impl<S: botgate_store::Store> StoreLedger<S> {
    pub fn new(store: std::sync::Arc<S>) -> Self {
        StoreLedger { store }
    }
}

impl<S: botgate_store::Store> super::ChallengeLedger for StoreLedger<S> {
    fn count_wait<'a>(
        &'a self,
        domain: &'a str,
        client: IpAddr,
        until_ms: u64,
    ) -> super::service::BoxFuture<'a, u64> {
        Box::pin(async move {
            // A digest: the store keeps no client address.
            let who = format!("{domain}\n{}", client_binding(client));
            let key = format!("challenge-waits:{}", botgate_store::key_digest(&who));
            match self.store.count(&key, until_ms).await {
                Ok(count) => count,
                Err(err) => {
                    tracing::warn!(error = %Report(&err), "cannot count a client's waited passes; allowing it");
                    0
                }
            }
        })
    }

    fn spend<'a>(&'a self, token: &'a str, until_ms: u64) -> super::service::BoxFuture<'a, bool> {
        Box::pin(async move {
            let mut holder = [0u8; 16];
            if getrandom::fill(&mut holder).is_err() {
                return true;
            }
            let holder: String = holder.iter().map(|b| format!("{b:02x}")).collect();
            let key = format!("challenge-spent:{}", botgate_store::key_digest(token));
            let now = botgate_store::now_ms();
            match self.store.lease(&key, &holder, now, until_ms).await {
                Ok(first) => first,
                Err(err) => {
                    tracing::warn!(error = %Report(&err), "cannot mark a challenge token spent; accepting it");
                    true
                }
            }
        })
    }
}

/// What the client posts back.
#[derive(Debug, Default, Clone)]
pub struct Submission {
    pub token: String,
    /// The proof-of-work counter (JavaScript page).
    pub counter: Option<String>,
    /// Whether the client answers by having waited (the page without JavaScript).
    pub waited: bool,
}

/// The keys and rules of challenges and passes.
pub struct Challenges {
    /// The HMAC keyed with the secret, its inner and outer key blocks already hashed:
    /// each MAC starts from a copy (two SHA-256 blocks fewer per pass checked).
    keyed: HmacSha256,
    /// Swapped whole by a reload; a challenge or pass carries what it was made with.
    config: ArcSwap<ChallengeConfig>,
    /// Each thread's passes verified lately, by cookie value: a hit stands for a
    /// successful check of the MAC over exactly its domain and client (the expiry is
    /// compared again on every hit), so a client's next requests skip the HMAC.
    verified: PerThread<VerifiedPass>,
}

/// What a pass is for: a website's domain under its owner (partner and user), so that
/// a pass never outlives the website it was earned on: a domain deleted and created
/// again for another owner starts without the last one's passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassSite<'a> {
    pub domain: &'a str,
    pub partner: &'a str,
    pub user: &'a str,
}

impl<'a> PassSite<'a> {
    /// The site of a stored website.
    pub fn of(website: &'a botgate_store::WebsiteRecord) -> PassSite<'a> {
        let owner = website.owner();
        PassSite {
            domain: website.website.domain.as_str(),
            partner: owner.partner.as_str(),
            user: owner.user.as_str(),
        }
    }

    /// What a pass's HMAC covers: its kind, the site, the client's binding and the
    /// expiry (`[kind, binding, expiry]`).
    fn with<'b>(&'b self, [kind, binding, expires]: [&'b str; 3]) -> [&'b str; 6] {
        [kind, self.domain, self.partner, self.user, binding, expires]
    }

    /// The site as one string (a verified pass remembers it).
    fn key(&self) -> String {
        format!("{}\n{}\n{}", self.domain, self.partner, self.user)
    }

    /// Whether `key` is this site's [`PassSite::key`], without making one (on every
    /// request with a pass: byte comparisons, no splitting).
    fn is(&self, key: &str) -> bool {
        let (d, p) = (self.domain.len(), self.partner.len());
        let key = key.as_bytes();
        key.len() == d + p + self.user.len() + 2
            && key[..d] == *self.domain.as_bytes()
            && key[d] == b'\n'
            && key[d + 1..d + 1 + p] == *self.partner.as_bytes()
            && key[d + 1 + p] == b'\n'
            && key[d + 2 + p..] == *self.user.as_bytes()
    }
}

/// What a verified pass's MAC covered.
struct VerifiedPass {
    /// The [`PassSite::key`] of its site.
    site: Box<str>,
    client: IpAddr,
    expires: u64,
    kind: PassKind,
}

/// How many passes each thread remembers, and the longest cookie value it remembers
/// (longer values are never a pass this gateway issued).
const VERIFIED_PASSES: usize = 64;
const MAX_PASS_VALUE: usize = 128;

type HmacSha256 = Hmac<Sha256>;

/// The part of a client address a pass is bound to: an IPv4 address, or an IPv6 /64
/// (one subscriber's network, which a client's privacy addresses move around in). The
/// listener has already turned IPv4-mapped IPv6 addresses into IPv4.
fn client_binding(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

fn leading_zero_bits(digest: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in digest {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

impl Challenges {
    /// Challenges signed with `secret` (at least 32 bytes of randomness).
    pub fn new(secret: Vec<u8>, config: ChallengeConfig) -> Challenges {
        Challenges {
            keyed: HmacSha256::new_from_slice(&secret).expect("HMAC takes any key"),
            config: ArcSwap::from_pointee(config),
            verified: PerThread::new(VERIFIED_PASSES, MAX_PASS_VALUE),
        }
    }

    pub fn config(&self) -> arc_swap::Guard<std::sync::Arc<ChallengeConfig>> {
        self.config.load()
    }

    /// Takes `config` for challenges and passes from now on.
    pub fn set_config(&self, config: ChallengeConfig) {
        self.config.store(std::sync::Arc::new(config));
    }

    /// The name every gateway sharing this secret (one cluster) goes by in `Via`
    /// (`botgate-` and twelve hex digits of an HMAC): the same on every node, and
    /// meaningless to anyone who reads it.
    pub fn pseudonym(&self) -> String {
        let mac = self.mac(&["via pseudonym"]);
        let hex: String = mac[..6].iter().map(|b| format!("{b:02x}")).collect();
        format!("botgate-{hex}")
    }

    /// The HMAC of `parts`, each followed by a line break so parts cannot run together.
    fn keyed(&self, parts: &[&str]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(b"\n");
        }
        mac
    }

    fn mac(&self, parts: &[&str]) -> Vec<u8> {
        self.keyed(parts).finalize().into_bytes().to_vec()
    }

    /// Whether `claimed` (base64url) is the HMAC of `parts`, compared in constant time.
    fn verify_mac(&self, parts: &[&str], claimed: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(claimed)
            .is_ok_and(|claimed| self.keyed(parts).verify_slice(&claimed).is_ok())
    }

    /// The difficulty of a new challenge: the configured one, raised while the website
    /// is under attack.
    pub fn difficulty(&self, under_attack: bool) -> u8 {
        let config = self.config.load();
        let extra = if under_attack {
            config.attack_extra_bits
        } else {
            0
        };
        config.difficulty.saturating_add(extra).min(MAX_DIFFICULTY)
    }

    /// How long a client without JavaScript waits on a token of `difficulty` bits: the
    /// configured wait, doubled for each bit above the configured difficulty (at most
    /// half the time a token may take).
    pub fn wait_for(&self, difficulty: u32) -> Duration {
        let config = self.config.load();
        let extra = difficulty.saturating_sub(u32::from(config.difficulty));
        let factor = 1u32.checked_shl(extra.min(16)).unwrap_or(u32::MAX);
        config
            .wait
            .saturating_mul(factor)
            .min(config.solve_within / 2)
    }

    /// A new challenge token of `difficulty` bits for `domain` and `client`, issued at
    /// `now` (Unix seconds); its wait follows from the difficulty and is signed with it.
    pub fn issue(&self, domain: &str, client: IpAddr, now: u64, difficulty: u8) -> String {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).expect("the OS gives randomness");
        let nonce = URL_SAFE_NO_PAD.encode(nonce);
        let issued = now.to_string();
        let difficulty = difficulty.min(MAX_DIFFICULTY);
        let wait = self.wait_for(u32::from(difficulty)).as_secs().to_string();
        let difficulty = difficulty.to_string();
        let binding = client_binding(client);
        let parts = [
            "token",
            domain,
            &binding,
            &issued,
            &difficulty,
            &wait,
            &nonce,
        ];
        let mac = self.mac(&parts);
        format!(
            "v2.{issued}.{difficulty}.{wait}.{nonce}.{}",
            URL_SAFE_NO_PAD.encode(mac)
        )
    }

    /// Seconds until a token's wait is over at `now` (for the page; the token is not
    /// checked here).
    pub fn seconds_left(token: &str, now: u64) -> u64 {
        let field = |n| token.split('.').nth(n).and_then(|f| f.parse::<u64>().ok());
        match (field(1), field(3)) {
            (Some(issued), Some(wait)) => wait_ends(issued, wait).saturating_sub(now),
            _ => 0,
        }
    }

    /// The difficulty a token asks for (0 for what is not a token).
    pub fn token_difficulty(token: &str) -> u32 {
        token
            .split('.')
            .nth(2)
            .and_then(|d| d.parse().ok())
            .unwrap_or(0)
    }

    /// Checks a submission for `domain` from `client` at `now`; on success answers the
    /// kind of pass it earned (the caller spends the token, counts a wait, and then
    /// makes the pass with [`Challenges::issue_pass`]).
    pub fn verify(
        &self,
        domain: &str,
        client: IpAddr,
        submission: &Submission,
        now: u64,
    ) -> Result<PassKind, Refusal> {
        let parts: Vec<&str> = submission.token.split('.').collect();
        let [version, issued, difficulty, wait, nonce, mac] = parts[..] else {
            return Err(Refusal::Malformed);
        };
        if version != "v2" {
            return Err(Refusal::Malformed);
        }
        let binding = client_binding(client);
        let signed = ["token", domain, &binding, issued, difficulty, wait, nonce];
        if !self.verify_mac(&signed, mac) {
            return Err(Refusal::Forged);
        }
        let issued_at: u64 = issued.parse().map_err(|_| Refusal::Malformed)?;
        let bits: u32 = difficulty.parse().map_err(|_| Refusal::Malformed)?;
        let wait: u64 = wait.parse().map_err(|_| Refusal::Malformed)?;
        let expires = issued_at.saturating_add(self.config.load().solve_within.as_secs());
        if now > expires || issued_at > now.saturating_add(60) {
            return Err(Refusal::Expired);
        }
        match &submission.counter {
            Some(counter) if !counter.is_empty() => {
                if counter.len() > 20 || !counter.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Refusal::Malformed);
                }
                let digest = Sha256::new()
                    .chain_update(submission.token.as_bytes())
                    .chain_update(b":")
                    .chain_update(counter.as_bytes())
                    .finalize();
                if leading_zero_bits(&digest) < bits {
                    return Err(Refusal::WrongWork);
                }
                Ok(PassKind::Work)
            }
            _ if submission.waited => {
                if now < wait_ends(issued_at, wait) {
                    return Err(Refusal::TooFast);
                }
                Ok(PassKind::Waited)
            }
            _ => Err(Refusal::Malformed),
        }
    }

    /// How long a pass of `kind` lasts.
    pub fn lifetime(&self, kind: PassKind) -> Duration {
        match kind {
            PassKind::Work => self.config.load().pass_lifetime,
            PassKind::Waited => self.config.load().waited_pass_lifetime,
        }
    }

    /// A new pass of `kind` for `site` and `client`, earned at `now` (Unix seconds).
    pub fn issue_pass(&self, site: PassSite, client: IpAddr, kind: PassKind, now: u64) -> String {
        let expires = now.saturating_add(self.lifetime(kind).as_secs());
        self.pass(site, client, kind, expires)
    }

    /// A pass of `kind` for `site` and `client` that expires at `expires` (Unix
    /// seconds).
    pub fn pass(&self, site: PassSite, client: IpAddr, kind: PassKind, expires: u64) -> String {
        let expires = expires.to_string();
        let binding = client_binding(client);
        let mac = self.mac(&site.with([kind.label(), &binding, &expires]));
        let prefix = match kind {
            PassKind::Work => "",
            PassKind::Waited => "w",
        };
        format!("{prefix}{expires}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// The state of the pass the request's `Cookie` values carry (under either name),
    /// for `site` and `client` at `now`: the best of them.
    pub fn pass_state<'a>(
        &self,
        cookie_headers: impl IntoIterator<Item = &'a [u8]>,
        site: PassSite,
        client: IpAddr,
        now: u64,
    ) -> PassState {
        let mut state = PassState::None;
        let mut macs_left = MAX_PASSES_CHECKED;
        for header in cookie_headers {
            // Bytes, not text: only the pass's own value need be UTF-8, so the rest of
            // the header (every other cookie of the site) is split, not read.
            for pair in header.split(|&b| b == b';') {
                let Some(value) = pass_value(pair.trim_ascii()) else {
                    continue;
                };
                let found = match std::str::from_utf8(value) {
                    Ok(value) => self.check_pass(value, site, client, now, &mut macs_left),
                    Err(_) => PassState::Invalid,
                };
                if found == PassState::Valid {
                    return found;
                }
                if found.rank() > state.rank() {
                    state = found;
                }
            }
        }
        state
    }

    /// The state of one pass value: from this thread's memory of verified passes, or
    /// by its HMAC while `macs_left` allows one (`None` when it does not).
    fn check_pass(
        &self,
        value: &str,
        site: PassSite,
        client: IpAddr,
        now: u64,
        macs_left: &mut usize,
    ) -> PassState {
        let verified = self.verified.here();
        // Read into a local first: a borrow held through the `match` would clash with
        // `put`'s.
        let known = verified
            .borrow()
            .get(value)
            .filter(|p| p.client == client && site.is(&p.site))
            .map(|p| (p.expires, p.kind));
        let (expires, kind) = match known {
            Some(known) => known,
            None => {
                let Some((expires, mac)) = value.split_once('.') else {
                    return PassState::Invalid;
                };
                let (kind, expires) = match expires.strip_prefix('w') {
                    Some(expires) => (PassKind::Waited, expires),
                    None => (PassKind::Work, expires),
                };
                if *macs_left == 0 {
                    return PassState::None;
                }
                *macs_left -= 1;
                let binding = client_binding(client);
                if !self.verify_mac(&site.with([kind.label(), &binding, expires]), mac) {
                    return PassState::Invalid;
                }
                let Ok(expires) = expires.parse::<u64>() else {
                    return PassState::Invalid;
                };
                let pass = VerifiedPass {
                    site: site.key().into(),
                    client,
                    expires,
                    kind,
                };
                verified.borrow_mut().put(value, pass);
                (expires, kind)
            }
        };
        match kind {
            _ if expires <= now => PassState::Expired,
            PassKind::Work => PassState::Valid,
            PassKind::Waited => PassState::Waited,
        }
    }

    /// The `Set-Cookie` value for a pass of `kind`: `Secure` under [`PASS_COOKIE`] over
    /// HTTPS, else under [`PLAIN_PASS_COOKIE`].
    pub fn pass_cookie(&self, pass: &str, kind: PassKind, https: bool) -> String {
        let (name, secure) = if https {
            (PASS_COOKIE, "; Secure")
        } else {
            (PLAIN_PASS_COOKIE, "")
        };
        format!(
            "{name}={pass}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
            self.lifetime(kind).as_secs(),
        )
    }

    /// The challenge page for `token` at `now`, returning to `return_to` once solved;
    /// with the wait for browsers without JavaScript when `offer_wait`.
    pub fn page(
        &self,
        token: &str,
        return_to: &str,
        note: Option<&str>,
        now: u64,
        offer_wait: bool,
    ) -> String {
        use super::pages::escape;
        let note = note
            .map(|n| format!("<p><strong>{}</strong></p>", escape(n)))
            .unwrap_or_default();
        let difficulty = Self::token_difficulty(token);
        let fallback = if offer_wait {
            format!(
                "<form method=\"post\" action=\"{VERIFY_PATH}\">\
                 <input type=\"hidden\" name=\"token\" value=\"{token}\">\
                 <input type=\"hidden\" name=\"wait\" value=\"1\">\
                 <input type=\"hidden\" name=\"return\" value=\"{return_to}\">\
                 <p>JavaScript is off, so this takes a little longer: please wait \
                 <span id=\"botgate-wait\">{wait}</span> seconds, then \
                 <button type=\"submit\">Continue</button></p></form>",
                token = escape(token),
                return_to = escape(return_to),
                wait = Self::seconds_left(token, now),
            )
        } else {
            "<p>Please turn JavaScript on to continue.</p>".to_owned()
        };
        let body = format!(
            "{note}<p>This website checks that visitors are people. Your browser is doing a \
             short calculation; you will be taken to the page in a moment.</p>\
             <p id=\"botgate-status\">Waiting for JavaScript…</p>\
             <form id=\"botgate-pow\" method=\"post\" action=\"{VERIFY_PATH}\" data-difficulty=\"{difficulty}\">\
             <input type=\"hidden\" name=\"token\" value=\"{token}\">\
             <input type=\"hidden\" name=\"counter\" value=\"\">\
             <input type=\"hidden\" name=\"return\" value=\"{return_to}\"></form>\
             <noscript>{fallback}</noscript>\
             <script>{script}</script>",
            token = escape(token),
            return_to = escape(return_to),
            script = include_str!("assets/challenge.js"),
        );
        super::pages::document("Checking your browser", &body)
    }
}

/// When the wait of a token issued at `issued` is over: `wait` whole seconds later
/// (times are whole seconds, so one more).
fn wait_ends(issued: u64, wait: u64) -> u64 {
    issued.saturating_add(wait).saturating_add(1)
}

/// The value of a pass cookie (under either name) in one `name=value` pair.
fn pass_value(pair: &[u8]) -> Option<&[u8]> {
    let (name, value) = pair.split_at(pair.iter().position(|&b| b == b'=')?);
    is_pass_cookie(name).then(|| &value[1..])
}

/// Takes the gateway's pass cookies out of a request's `Cookie` fields. They are the
/// gateway's, not the website's: the rules learn their state as `pass`, and a pass's
/// random MAC can look like an attack to the CRS; the origin never set them. The
/// website's cookies stay, in one field however many the client sent (HTTP/2 browsers
/// send one per cookie; an HTTP/1.1 origin wants one, RFC 9113 §8.2.3). Returns the
/// fields as sent when it changed them, for [`Challenges::pass_state`]; else nothing.
pub fn take_pass_cookies(headers: &mut HeaderMap) -> Vec<HeaderValue> {
    let mut fields = headers.get_all(COOKIE).iter();
    let Some(first) = fields.next() else {
        return Vec::new();
    };
    // Both pass cookies' names start with PASS_COOKIE; the searcher is built once.
    static PASS_NAME: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(PASS_COOKIE));
    if fields.next().is_none() && PASS_NAME.find(first.as_bytes()).is_none() {
        return Vec::new();
    }
    let sent: Vec<HeaderValue> = headers.get_all(COOKIE).iter().cloned().collect();
    headers.remove(COOKIE);
    let mut kept = Vec::with_capacity(sent.iter().map(|f| f.len() + 2).sum());
    for pair in sent.iter().flat_map(|f| f.as_bytes().split(|&b| b == b';')) {
        let pair = pair.trim_ascii();
        if pair.is_empty() || pass_value(pair).is_some() {
            continue;
        }
        if !kept.is_empty() {
            kept.extend_from_slice(b"; ");
        }
        kept.extend_from_slice(pair);
    }
    // The bytes of valid fields joined by "; " make a valid field.
    if let Ok(kept) = HeaderValue::from_maybe_shared(bytes::Bytes::from(kept))
        && !kept.is_empty()
    {
        headers.insert(COOKIE, kept);
    }
    sent
}

/// Whether a cookie name is one of the gateway's pass cookies.
fn is_pass_cookie(name: &[u8]) -> bool {
    name == PASS_COOKIE.as_bytes() || name == PLAIN_PASS_COOKIE.as_bytes()
}

/// A safe place to return to after the challenge: a path on the same website (never
/// `//host` or a scheme), else `/`.
pub fn safe_return(target: &str) -> &str {
    let ok = target.starts_with('/')
        && !target.starts_with("//")
        && !target.starts_with("/\\")
        && target.len() <= 4096
        && !target.bytes().any(|b| b.is_ascii_control());
    if ok { target } else { "/" }
}

/// Solves a token's proof of work (for tests and tools; browsers run the page's script).
pub fn solve(token: &str) -> Option<u64> {
    let bits: u32 = token.split('.').nth(2)?.parse().ok()?;
    (0..u64::MAX).find(|counter| {
        let digest = Sha256::new()
            .chain_update(token.as_bytes())
            .chain_update(b":")
            .chain_update(counter.to_string().as_bytes())
            .finalize();
        leading_zero_bits(&digest) >= bits
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenges(difficulty: u8) -> Challenges {
        Challenges::new(
            vec![7; 32],
            ChallengeConfig {
                difficulty,
                ..ChallengeConfig::default()
            },
        )
    }

    const CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7));
    const NOW: u64 = 1_800_000_000;
    const SITE: PassSite = PassSite {
        domain: "example.com",
        partner: "hoster",
        user: "ann",
    };

    fn work(token: &str) -> Submission {
        Submission {
            token: token.into(),
            counter: Some(solve(token).unwrap().to_string()),
            waited: false,
        }
    }

    fn waited(token: &str) -> Submission {
        Submission {
            token: token.into(),
            counter: None,
            waited: true,
        }
    }

    /// The pass of a challenge for `example.com` and [`CLIENT`] issued at [`NOW`] and
    /// solved a second later.
    fn solved_pass(c: &Challenges) -> String {
        let token = c.issue("example.com", CLIENT, NOW, c.difficulty(false));
        let kind = c.verify("example.com", CLIENT, &work(&token), NOW + 1);
        assert_eq!(kind, Ok(PassKind::Work));
        c.issue_pass(SITE, CLIENT, PassKind::Work, NOW + 1)
    }

    #[test]
    fn pass_cookies_are_taken_out_and_the_rest_joined_in_one_field() {
        let take = |fields: &[&str]| {
            let mut headers = HeaderMap::new();
            for field in fields {
                headers.append(COOKIE, HeaderValue::from_str(field).unwrap());
            }
            let sent = take_pass_cookies(&mut headers);
            let left: Vec<_> = headers.get_all(COOKIE).iter().cloned().collect();
            (left, sent.len())
        };
        let one = |text: &str| vec![HeaderValue::from_str(text).unwrap()];
        // Nothing of the gateway's and one field: untouched, nothing kept aside.
        assert_eq!(take(&[]), (vec![], 0));
        assert_eq!(take(&["sid=1; a=b"]), (one("sid=1; a=b"), 0));
        // Names that only look like a pass's stay.
        let alike = "xbotgate_pass=1; botgate_pass_other=2; botgate_pass";
        assert_eq!(take(&[alike]), (one(alike), 1));
        // The pass goes, wherever it stands; so does the field it was alone in.
        let pass = format!("{PASS_COOKIE}=1.x");
        assert_eq!(take(&[&pass]), (vec![], 1));
        let plain = format!("sid=1;{PLAIN_PASS_COOKIE}=w1.y ; ;theme=dark");
        assert_eq!(take(&[&plain]), (one("sid=1; theme=dark"), 1));
        // Several fields (an HTTP/2 browser's) become one.
        assert_eq!(
            take(&["sid=1", &pass, "theme=dark; q=\"a b\""]),
            (one("sid=1; theme=dark; q=\"a b\""), 3)
        );
        assert_eq!(
            take(&["sid=1", "theme=dark"]),
            (one("sid=1; theme=dark"), 2)
        );
        // What the pass check reads is the fields as sent.
        let c = challenges(1);
        let issued = solved_pass(&c);
        let mut headers = HeaderMap::new();
        let field = format!("sid=1; {PASS_COOKIE}={issued}");
        headers.insert(COOKIE, HeaderValue::from_str(&field).unwrap());
        let sent = take_pass_cookies(&mut headers);
        let state = c.pass_state(sent.iter().map(|f| f.as_bytes()), SITE, CLIENT, NOW + 2);
        assert_eq!(state, PassState::Valid);
    }

    #[test]
    fn a_verified_pass_is_remembered_for_exactly_what_its_mac_covers() {
        let c = challenges(8);
        let pass = solved_pass(&c);
        let remembered = |value: &str, domain: &str, client| {
            let verified = c.verified.here_if_used()?.borrow();
            let pass = verified.get(value)?;
            let site = PassSite { domain, ..SITE };
            (site.is(&pass.site) && pass.client == client).then_some(pass.expires)
        };
        let state = |value: &str, now| {
            let cookie = format!("{PASS_COOKIE}={value}");
            c.pass_state([cookie.as_bytes()], SITE, CLIENT, now)
        };
        assert_eq!(remembered(&pass, "example.com", CLIENT), None);
        assert_eq!(state(&pass, NOW + 2), PassState::Valid);
        let expires = remembered(&pass, "example.com", CLIENT).expect("remembered");
        assert_eq!(expires, NOW + 1 + 3600);
        assert_eq!(remembered(&pass, "other.com", CLIENT), None);
        let elsewhere = IpAddr::from([198, 51, 100, 1]);
        assert_eq!(remembered(&pass, "example.com", elsewhere), None);
        // A remembered pass still expires.
        assert_eq!(state(&pass, expires), PassState::Expired);
        // A forged pass (a later expiry under the same MAC) is refused, and not remembered.
        let (_, mac) = pass.split_once('.').unwrap();
        let forged = format!("{}.{mac}", NOW + 99_999);
        assert_eq!(state(&forged, NOW + 2), PassState::Invalid);
        assert_eq!(remembered(&forged, "example.com", CLIENT), None);
        // Another thread has its own memory, and verifies afresh.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert_eq!(remembered(&pass, "example.com", CLIENT), None);
                assert_eq!(state(&pass, NOW + 2), PassState::Valid);
            });
        });
    }

    #[test]
    fn solved_work_earns_a_pass_for_that_site_and_client_only() {
        let c = challenges(8);
        let pass = solved_pass(&c);
        let cookie = format!("a=b; {PASS_COOKIE}={pass}");
        let state = |site, client, now| c.pass_state([cookie.as_bytes()], site, client, now);
        assert_eq!(state(SITE, CLIENT, NOW + 2), PassState::Valid);
        let other = PassSite {
            domain: "other.com",
            ..SITE
        };
        assert_eq!(state(other, CLIENT, NOW + 2), PassState::Invalid);
        // The same domain under another owner (deleted and created again) is another site.
        for owned_otherwise in [
            PassSite {
                partner: "other-hoster",
                ..SITE
            },
            PassSite {
                user: "bob",
                ..SITE
            },
        ] {
            assert_eq!(state(owned_otherwise, CLIENT, NOW + 2), PassState::Invalid);
        }
        let elsewhere = IpAddr::from([198, 51, 100, 1]);
        assert_eq!(state(SITE, elsewhere, NOW + 2), PassState::Invalid);
        assert_eq!(state(SITE, CLIENT, NOW + 7200), PassState::Expired);
        assert_eq!(
            c.pass_state([&b"x=1"[..]], SITE, CLIENT, NOW),
            PassState::None
        );
        // Other cookies are split, not read: one that is not UTF-8 hides no pass; a
        // name that only ends in the pass's, or a pass value that is not UTF-8, is none.
        let mut beside = b"site=\xff\xfe;  ".to_vec();
        beside.extend_from_slice(format!("{PASS_COOKIE}={pass} ;x=1").as_bytes());
        assert_eq!(
            c.pass_state([&beside[..]], SITE, CLIENT, NOW + 2),
            PassState::Valid
        );
        let suffixed = format!("x{PASS_COOKIE}={pass}");
        assert_eq!(
            c.pass_state([suffixed.as_bytes()], SITE, CLIENT, NOW + 2),
            PassState::None
        );
        let garbled = [PASS_COOKIE.as_bytes(), b"=\xff.AAAA"].concat();
        assert_eq!(
            c.pass_state([&garbled[..]], SITE, CLIENT, NOW + 2),
            PassState::Invalid
        );
    }

    #[test]
    fn only_a_few_pass_cookies_are_checked_by_their_mac() {
        let c = challenges(8);
        let pass = solved_pass(&c);
        let packed = |forged: usize| {
            let mut cookie: String = (0..forged)
                .map(|i| format!("{PASS_COOKIE}={}.AAAA; ", NOW + i as u64))
                .collect();
            cookie.push_str(&format!("{PASS_COOKIE}={pass}"));
            c.pass_state([cookie.as_bytes()], SITE, CLIENT, NOW + 2)
        };
        assert_eq!(
            packed(5000),
            PassState::Invalid,
            "not verified past the cap"
        );
        assert_eq!(packed(MAX_PASSES_CHECKED - 1), PassState::Valid);
        // Once verified on this thread, the pass is recognised behind any number of
        // forged ones, which cost no HMAC past the cap.
        assert_eq!(packed(5000), PassState::Valid);
    }

    #[test]
    fn a_token_is_bound_to_site_client_and_time() {
        let c = challenges(8);
        let token = c.issue("example.com", CLIENT, NOW, 8);
        let sub = work(&token);
        let elsewhere = IpAddr::from([198, 51, 100, 1]);
        assert_eq!(
            c.verify("example.com", elsewhere, &sub, NOW),
            Err(Refusal::Forged)
        );
        assert_eq!(
            c.verify("other.com", CLIENT, &sub, NOW),
            Err(Refusal::Forged)
        );
        assert_eq!(
            c.verify("example.com", CLIENT, &sub, NOW + 301),
            Err(Refusal::Expired)
        );
        let easier = token.replacen(".8.", ".1.", 1);
        let sub = Submission {
            token: easier,
            ..sub
        };
        assert_eq!(
            c.verify("example.com", CLIENT, &sub, NOW),
            Err(Refusal::Forged),
            "lowering the difficulty breaks the signature"
        );
    }

    #[test]
    fn wrong_work_is_refused() {
        let c = challenges(20);
        let token = c.issue("example.com", CLIENT, NOW, 20);
        let wrong = (0..)
            .find(|n| {
                let d = Sha256::digest(format!("{token}:{n}"));
                leading_zero_bits(&d) < 20
            })
            .unwrap();
        let sub = Submission {
            token,
            counter: Some(wrong.to_string()),
            waited: false,
        };
        assert_eq!(
            c.verify("example.com", CLIENT, &sub, NOW),
            Err(Refusal::WrongWork)
        );
    }

    #[test]
    fn without_javascript_a_client_waits_and_gets_a_shorter_waited_pass() {
        let c = challenges(16);
        let token = c.issue("example.com", CLIENT, NOW, 16);
        let wait = c.wait_for(16).as_secs();
        assert_eq!(wait, 5);
        // Five whole seconds: the second it was issued in does not count.
        assert_eq!(Challenges::seconds_left(&token, NOW), 6);
        assert_eq!(
            c.verify("example.com", CLIENT, &waited(&token), NOW + wait),
            Err(Refusal::TooFast)
        );
        let wait = wait + 1;
        // Neither a counter nor the wait is no answer.
        let neither = Submission {
            waited: false,
            ..waited(&token)
        };
        assert_eq!(
            c.verify("example.com", CLIENT, &neither, NOW + wait),
            Err(Refusal::Malformed)
        );
        assert_eq!(
            c.verify("example.com", CLIENT, &waited(&token), NOW + wait),
            Ok(PassKind::Waited)
        );
        // The waited pass is marked as such, lasts ten minutes, and is no work pass.
        let pass = c.issue_pass(SITE, CLIENT, PassKind::Waited, NOW + wait);
        assert!(pass.starts_with('w'), "{pass}");
        let state = |value: &str, now| {
            let cookie = format!("{PLAIN_PASS_COOKIE}={value}");
            c.pass_state([cookie.as_bytes()], SITE, CLIENT, now)
        };
        assert_eq!(state(&pass, NOW + wait + 1), PassState::Waited);
        assert_eq!(
            state(&pass, NOW + wait + 1),
            PassState::Waited,
            "remembered"
        );
        assert_eq!(state(&pass, NOW + wait + 600), PassState::Expired);
        let as_work = pass.trim_start_matches('w');
        assert_eq!(state(as_work, NOW + wait + 1), PassState::Invalid);
        // A work pass beside it is the better of the two.
        let work_pass = solved_pass(&c);
        let both = format!("{PLAIN_PASS_COOKIE}={pass}; {PASS_COOKIE}={work_pass}");
        assert_eq!(
            c.pass_state([both.as_bytes()], SITE, CLIENT, NOW + wait + 1),
            PassState::Valid
        );
    }

    #[test]
    fn under_attack_the_work_and_the_wait_grow() {
        let c = challenges(16);
        assert_eq!(c.difficulty(false), 16);
        assert_eq!(c.difficulty(true), 19);
        assert_eq!(c.wait_for(19), Duration::from_secs(40));
        // The wait never outlasts half a token's life, however hard the work.
        assert_eq!(c.wait_for(32), Duration::from_secs(150));
        let token = c.issue("example.com", CLIENT, NOW, c.difficulty(true));
        assert_eq!(Challenges::token_difficulty(&token), 19);
        let page = c.page(&token, "/", None, NOW, true);
        assert!(page.contains("data-difficulty=\"19\""), "{page}");
        assert!(page.contains(">41</span> seconds"), "{page}");
        let later = c.page(&token, "/", None, NOW + 30, true);
        assert!(later.contains(">11</span> seconds"), "{later}");
        assert_eq!(
            c.verify("example.com", CLIENT, &waited(&token), NOW + 40),
            Err(Refusal::TooFast)
        );
        assert_eq!(
            c.verify("example.com", CLIENT, &waited(&token), NOW + 41),
            Ok(PassKind::Waited)
        );
        // The wait is the token's, signed: a node with another configuration, or a
        // client that edits it, does not shorten it.
        let shorter = token.replacen(".40.", ".1.", 1);
        assert_eq!(
            c.verify("example.com", CLIENT, &waited(&shorter), NOW + 41),
            Err(Refusal::Forged)
        );
        let elsewhere = challenges(19);
        assert_eq!(
            elsewhere.verify("example.com", CLIENT, &waited(&token), NOW + 40),
            Err(Refusal::TooFast)
        );
        // Without the wait on offer (its allowance used up), the page says so.
        let page = c.page(&token, "/", None, NOW, false);
        assert!(!page.contains("name=\"wait\""), "{page}");
        assert!(page.contains("turn JavaScript on"), "{page}");
    }

    #[test]
    fn plain_http_passes_have_a_name_of_their_own() {
        let c = challenges(8);
        let pass = solved_pass(&c);
        let secure = c.pass_cookie(&pass, PassKind::Work, true);
        assert!(
            secure.starts_with(&format!("{PASS_COOKIE}={pass};")),
            "{secure}"
        );
        assert!(secure.ends_with("; Secure") && secure.contains("Max-Age=3600"));
        let plain = c.pass_cookie(&pass, PassKind::Waited, false);
        assert!(
            plain.starts_with(&format!("{PLAIN_PASS_COOKIE}={pass};")),
            "{plain}"
        );
        assert!(!plain.contains("Secure") && plain.contains("Max-Age=600"));
        let cookie = format!("{PLAIN_PASS_COOKIE}={pass}");
        assert_eq!(
            c.pass_state([cookie.as_bytes()], SITE, CLIENT, NOW + 2),
            PassState::Valid
        );
    }

    #[test]
    fn ipv6_clients_are_bound_by_their_64() {
        let c = challenges(8);
        let a: IpAddr = "2001:db8:1:2::10".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::10".parse().unwrap();
        let pass = c.pass(SITE, a, PassKind::Work, NOW + 60);
        let cookie = format!("{PASS_COOKIE}={pass}");
        let state = |ip| c.pass_state([cookie.as_bytes()], SITE, ip, NOW);
        assert_eq!(state(b), PassState::Valid);
        assert_eq!(state(other), PassState::Invalid);
    }

    #[test]
    fn return_targets_stay_on_the_site() {
        assert_eq!(safe_return("/a?b=c"), "/a?b=c");
        assert_eq!(safe_return("//evil.example/"), "/");
        assert_eq!(safe_return("https://evil.example/"), "/");
        assert_eq!(safe_return("/\\evil.example"), "/");
    }
}
