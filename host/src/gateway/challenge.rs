//! The built-in challenge: a proof-of-work page (with a question for clients without
//! JavaScript) and the signed pass cookie a solved challenge earns.
//!
//! Everything is signed with one cluster-wide secret (kept in the store, so every
//! gateway of a cluster accepts what another issued):
//!
//! - a **challenge token** `v1.<issued>.<difficulty>.<nonce>.<mac>` names the website,
//!   the client and the time it was issued; the client must find a `counter` such that
//!   `SHA-256("<token>:<counter>")` starts with `difficulty` zero bits;
//! - the **question** fallback (inside `<noscript>`) asks for the sum of two numbers
//!   derived from the secret and the nonce, so the page alone does not give it away;
//! - the **pass** cookie `botgate_pass=<expires>.<mac>` is bound to the website (its
//!   domain, so its listed subdomains share it) and to the client (its IPv4 address, or
//!   its IPv6 /64), and expires.
//!
//! A token gives one pass: once answered it is spent, in the store, for every gateway
//! ([`StoreSpentTokens`]). A page that starts several requests at once gets several
//! challenges, and solving any one of them earns the pass the others then see, so
//! parallel requests from one client never loop.

use crate::recent::PerThread;
use crate::rules::bindings::ChallengePass;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::time::Duration;

/// The path the challenge form posts to, on every website.
pub const VERIFY_PATH: &str = "/.botgate/challenge";
/// The most pass cookies of one request checked by their HMAC (those this thread
/// verified lately are always recognised): a browser sends one, or a few with passes
/// for parent paths or domains, and a header packed with thousands would cost an HMAC
/// each.
const MAX_PASSES_CHECKED: usize = 8;
/// The pass cookie's name.
pub const PASS_COOKIE: &str = "botgate_pass";
/// The name the secret is kept under in the store.
pub const SECRET_NAME: &str = "challenge-pass";

/// How a challenge behaves.
#[derive(Debug, Clone)]
pub struct ChallengeConfig {
    /// Leading zero bits the proof of work must reach (each bit doubles the work; 16 is
    /// about 65 000 hashes, well under a second in a browser).
    pub difficulty: u8,
    /// How long a solved challenge lets the client pass.
    pub pass_lifetime: Duration,
    /// How long a challenge may take to solve.
    pub solve_within: Duration,
    /// The least time a person needs to answer the question fallback.
    pub question_min_delay: Duration,
}

impl Default for ChallengeConfig {
    fn default() -> Self {
        ChallengeConfig {
            difficulty: 16,
            pass_lifetime: Duration::from_secs(3600),
            solve_within: Duration::from_secs(300),
            question_min_delay: Duration::from_secs(2),
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
    #[error("the answer is wrong")]
    WrongAnswer,
    #[error("the answer came too fast")]
    TooFast,
    #[error("this challenge was answered already")]
    Spent,
}

/// Store-backed [`super::SpentTokens`]: a token is spent by taking a lease on its
/// digest in the store until it would expire anyway, so it gives one pass across a
/// cluster. While the store cannot be reached, tokens are not checked (a warning is
/// logged): a challenge is never failed for the store's sake.
pub struct StoreSpentTokens<S> {
    store: std::sync::Arc<S>,
}

impl<S: botgate_store::Store> StoreSpentTokens<S> {
    pub fn new(store: std::sync::Arc<S>) -> Self {
        StoreSpentTokens { store }
    }
}

impl<S: botgate_store::Store> super::SpentTokens for StoreSpentTokens<S> {
    fn spend<'a>(&'a self, token: &'a str, until_ms: u64) -> super::BoxFuture<'a, bool> {
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
                    tracing::warn!(%err, "cannot mark a challenge token spent; accepting it");
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
    /// The question's answer (fallback page).
    pub answer: Option<String>,
}

/// The keys and rules of challenges and passes.
pub struct Challenges {
    /// The HMAC keyed with the secret, its inner and outer key blocks already hashed:
    /// each MAC starts from a copy (two SHA-256 blocks fewer per pass checked).
    keyed: HmacSha256,
    config: ChallengeConfig,
    /// Each thread's passes verified lately, by cookie value: a hit stands for a
    /// successful check of the MAC over exactly its domain and client (the expiry is
    /// compared again on every hit), so a client's next requests skip the HMAC.
    verified: PerThread<VerifiedPass>,
}

/// What a verified pass's MAC covered.
struct VerifiedPass {
    domain: Box<str>,
    client: IpAddr,
    expires: u64,
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

const NUMBER_WORDS: [&str; 10] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

impl Challenges {
    /// Challenges signed with `secret` (at least 32 bytes of randomness).
    pub fn new(secret: Vec<u8>, config: ChallengeConfig) -> Challenges {
        Challenges {
            keyed: HmacSha256::new_from_slice(&secret).expect("HMAC takes any key"),
            config,
            verified: PerThread::new(VERIFIED_PASSES, MAX_PASS_VALUE),
        }
    }

    pub fn config(&self) -> &ChallengeConfig {
        &self.config
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

    /// A new challenge token for `domain` and `client`, issued at `now` (Unix seconds).
    pub fn issue(&self, domain: &str, client: IpAddr, now: u64) -> String {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).expect("the OS gives randomness");
        let nonce = URL_SAFE_NO_PAD.encode(nonce);
        let issued = now.to_string();
        let difficulty = self.config.difficulty.to_string();
        let binding = client_binding(client);
        let mac = self.mac(&["token", domain, &binding, &issued, &difficulty, &nonce]);
        format!(
            "v1.{issued}.{difficulty}.{nonce}.{}",
            URL_SAFE_NO_PAD.encode(mac)
        )
    }

    /// The two numbers of the question fallback for a token's nonce.
    fn question(&self, nonce: &str) -> (u8, u8) {
        let digest = self.mac(&["question", nonce]);
        (digest[0] % 10 + 1, digest[1] % 10 + 1)
    }

    /// The question a token's fallback asks, in words.
    pub fn question_text(&self, token: &str) -> String {
        let nonce = token.split('.').nth(3).unwrap_or_default();
        let (a, b) = self.question(nonce);
        format!(
            "What is {} plus {}?",
            NUMBER_WORDS[usize::from(a - 1)],
            NUMBER_WORDS[usize::from(b - 1)]
        )
    }

    /// Checks a submission for `domain` from `client` at `now`; on success answers the
    /// pass cookie's value.
    pub fn verify(
        &self,
        domain: &str,
        client: IpAddr,
        submission: &Submission,
        now: u64,
    ) -> Result<String, Refusal> {
        let parts: Vec<&str> = submission.token.split('.').collect();
        let [version, issued, difficulty, nonce, mac] = parts[..] else {
            return Err(Refusal::Malformed);
        };
        if version != "v1" {
            return Err(Refusal::Malformed);
        }
        let binding = client_binding(client);
        if !self.verify_mac(&["token", domain, &binding, issued, difficulty, nonce], mac) {
            return Err(Refusal::Forged);
        }
        let issued_at: u64 = issued.parse().map_err(|_| Refusal::Malformed)?;
        let bits: u32 = difficulty.parse().map_err(|_| Refusal::Malformed)?;
        if now > issued_at + self.config.solve_within.as_secs() || issued_at > now + 60 {
            return Err(Refusal::Expired);
        }
        match (&submission.counter, &submission.answer) {
            (Some(counter), _) if !counter.is_empty() => {
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
            }
            (_, Some(answer)) => {
                if now < issued_at + self.config.question_min_delay.as_secs() {
                    return Err(Refusal::TooFast);
                }
                let (a, b) = self.question(nonce);
                let expected = u32::from(a) + u32::from(b);
                if answer.trim().parse::<u32>().ok() != Some(expected) {
                    return Err(Refusal::WrongAnswer);
                }
            }
            _ => return Err(Refusal::Malformed),
        }
        Ok(self.pass(domain, client, now + self.config.pass_lifetime.as_secs()))
    }

    /// A pass for `domain` and `client` that expires at `expires` (Unix seconds).
    pub fn pass(&self, domain: &str, client: IpAddr, expires: u64) -> String {
        let expires = expires.to_string();
        let mac = self.mac(&["pass", domain, &client_binding(client), &expires]);
        format!("{expires}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// The state of the pass `cookie_header` carries (the request's `Cookie` values),
    /// for `domain` and `client` at `now`.
    pub fn pass_state<'a>(
        &self,
        cookie_headers: impl IntoIterator<Item = &'a [u8]>,
        domain: &str,
        client: IpAddr,
        now: u64,
    ) -> ChallengePass {
        let mut state = ChallengePass::None;
        let mut macs_left = MAX_PASSES_CHECKED;
        for header in cookie_headers {
            // Bytes, not text: only the pass's own value need be UTF-8, so the rest of
            // the header (every other cookie of the site) is split, not read.
            for pair in header.split(|&b| b == b';') {
                let Some(value) = pair
                    .trim_ascii()
                    .strip_prefix(PASS_COOKIE.as_bytes())
                    .and_then(|rest| rest.strip_prefix(b"="))
                else {
                    continue;
                };
                let found = match std::str::from_utf8(value) {
                    Ok(value) => self.check_pass(value, domain, client, now, &mut macs_left),
                    Err(_) => ChallengePass::Invalid,
                };
                if found == ChallengePass::Valid {
                    return found;
                }
                if found != ChallengePass::None && state != ChallengePass::Expired {
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
        domain: &str,
        client: IpAddr,
        now: u64,
        macs_left: &mut usize,
    ) -> ChallengePass {
        let verified = self.verified.here();
        // Read into a local first: a borrow held through the `match` would clash with
        // `put`'s.
        let known = verified
            .borrow()
            .get(value)
            .filter(|p| p.client == client && *p.domain == *domain)
            .map(|p| p.expires);
        let expires = match known {
            Some(expires) => expires,
            None => {
                let Some((expires, mac)) = value.split_once('.') else {
                    return ChallengePass::Invalid;
                };
                if *macs_left == 0 {
                    return ChallengePass::None;
                }
                *macs_left -= 1;
                if !self.verify_mac(&["pass", domain, &client_binding(client), expires], mac) {
                    return ChallengePass::Invalid;
                }
                let Ok(expires) = expires.parse::<u64>() else {
                    return ChallengePass::Invalid;
                };
                let pass = VerifiedPass {
                    domain: domain.into(),
                    client,
                    expires,
                };
                verified.borrow_mut().put(value, pass);
                expires
            }
        };
        if expires > now {
            ChallengePass::Valid
        } else {
            ChallengePass::Expired
        }
    }

    /// The `Set-Cookie` value for a pass.
    pub fn pass_cookie(&self, pass: &str, secure: bool) -> String {
        format!(
            "{PASS_COOKIE}={pass}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}",
            self.config.pass_lifetime.as_secs(),
            if secure { "; Secure" } else { "" }
        )
    }

    /// The challenge page for `token`, returning to `return_to` once solved.
    pub fn page(&self, token: &str, return_to: &str, note: Option<&str>) -> String {
        use super::pages::escape;
        let note = note
            .map(|n| format!("<p><strong>{}</strong></p>", escape(n)))
            .unwrap_or_default();
        let body = format!(
            "{note}<p>This website checks that visitors are people. Your browser is doing a \
             short calculation; you will be taken to the page in a moment.</p>\
             <p id=\"botgate-status\">Waiting for JavaScript…</p>\
             <form id=\"botgate-pow\" method=\"post\" action=\"{VERIFY_PATH}\" data-difficulty=\"{difficulty}\">\
             <input type=\"hidden\" name=\"token\" value=\"{token}\">\
             <input type=\"hidden\" name=\"counter\" value=\"\">\
             <input type=\"hidden\" name=\"return\" value=\"{return_to}\"></form>\
             <noscript><form method=\"post\" action=\"{VERIFY_PATH}\">\
             <input type=\"hidden\" name=\"token\" value=\"{token}\">\
             <input type=\"hidden\" name=\"return\" value=\"{return_to}\">\
             <p><label>JavaScript is off. {question} \
             <input name=\"answer\" inputmode=\"numeric\" size=\"4\" autocomplete=\"off\"></label> \
             <button type=\"submit\">Continue</button></p></form></noscript>\
             <script>{script}</script>",
            difficulty = self.config.difficulty,
            token = escape(token),
            return_to = escape(return_to),
            question = escape(&self.question_text(token)),
            script = include_str!("assets/challenge.js"),
        );
        super::pages::document("Checking your browser", &body)
    }
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

    fn work(token: &str) -> Submission {
        Submission {
            token: token.into(),
            counter: Some(solve(token).unwrap().to_string()),
            answer: None,
        }
    }

    /// The pass of a challenge for `example.com` and [`CLIENT`] issued at [`NOW`] and
    /// solved a second later.
    fn solved_pass(c: &Challenges) -> String {
        let token = c.issue("example.com", CLIENT, NOW);
        c.verify("example.com", CLIENT, &work(&token), NOW + 1)
            .unwrap()
    }

    #[test]
    fn a_verified_pass_is_remembered_for_exactly_what_its_mac_covers() {
        let c = challenges(8);
        let pass = solved_pass(&c);
        let remembered = |value: &str, domain: &str, client| {
            let verified = c.verified.here_if_used()?.borrow();
            let pass = verified.get(value)?;
            (*pass.domain == *domain && pass.client == client).then_some(pass.expires)
        };
        let state = |value: &str, now| {
            let cookie = format!("{PASS_COOKIE}={value}");
            c.pass_state([cookie.as_bytes()], "example.com", CLIENT, now)
        };
        assert_eq!(remembered(&pass, "example.com", CLIENT), None);
        assert_eq!(state(&pass, NOW + 2), ChallengePass::Valid);
        let expires = remembered(&pass, "example.com", CLIENT).expect("remembered");
        assert_eq!(expires, NOW + 1 + 3600);
        assert_eq!(remembered(&pass, "other.com", CLIENT), None);
        let elsewhere = IpAddr::from([198, 51, 100, 1]);
        assert_eq!(remembered(&pass, "example.com", elsewhere), None);
        // A remembered pass still expires.
        assert_eq!(state(&pass, expires), ChallengePass::Expired);
        // A forged pass (a later expiry under the same MAC) is refused, and not remembered.
        let (_, mac) = pass.split_once('.').unwrap();
        let forged = format!("{}.{mac}", NOW + 99_999);
        assert_eq!(state(&forged, NOW + 2), ChallengePass::Invalid);
        assert_eq!(remembered(&forged, "example.com", CLIENT), None);
        // Another thread has its own memory, and verifies afresh.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert_eq!(remembered(&pass, "example.com", CLIENT), None);
                assert_eq!(state(&pass, NOW + 2), ChallengePass::Valid);
            });
        });
    }

    #[test]
    fn solved_work_earns_a_pass_for_that_site_and_client_only() {
        let c = challenges(8);
        let pass = solved_pass(&c);
        let cookie = format!("a=b; {PASS_COOKIE}={pass}");
        let state = |domain, client, now| c.pass_state([cookie.as_bytes()], domain, client, now);
        assert_eq!(state("example.com", CLIENT, NOW + 2), ChallengePass::Valid);
        assert_eq!(state("other.com", CLIENT, NOW + 2), ChallengePass::Invalid);
        let elsewhere = IpAddr::from([198, 51, 100, 1]);
        assert_eq!(
            state("example.com", elsewhere, NOW + 2),
            ChallengePass::Invalid
        );
        assert_eq!(
            state("example.com", CLIENT, NOW + 7200),
            ChallengePass::Expired
        );
        assert_eq!(
            c.pass_state([&b"x=1"[..]], "example.com", CLIENT, NOW),
            ChallengePass::None
        );
        // Other cookies are split, not read: one that is not UTF-8 hides no pass; a
        // name that only ends in the pass's, or a pass value that is not UTF-8, is none.
        let mut beside = b"site=\xff\xfe;  ".to_vec();
        beside.extend_from_slice(format!("{PASS_COOKIE}={pass} ;x=1").as_bytes());
        assert_eq!(
            c.pass_state([&beside[..]], "example.com", CLIENT, NOW + 2),
            ChallengePass::Valid
        );
        let suffixed = format!("x{PASS_COOKIE}={pass}");
        assert_eq!(
            c.pass_state([suffixed.as_bytes()], "example.com", CLIENT, NOW + 2),
            ChallengePass::None
        );
        let garbled = [PASS_COOKIE.as_bytes(), b"=\xff.AAAA"].concat();
        assert_eq!(
            c.pass_state([&garbled[..]], "example.com", CLIENT, NOW + 2),
            ChallengePass::Invalid
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
            c.pass_state([cookie.as_bytes()], "example.com", CLIENT, NOW + 2)
        };
        assert_eq!(
            packed(5000),
            ChallengePass::Invalid,
            "not verified past the cap"
        );
        assert_eq!(packed(MAX_PASSES_CHECKED - 1), ChallengePass::Valid);
        // Once verified on this thread, the pass is recognised behind any number of
        // forged ones, which cost no HMAC past the cap.
        assert_eq!(packed(5000), ChallengePass::Valid);
    }

    #[test]
    fn a_token_is_bound_to_site_client_and_time() {
        let c = challenges(8);
        let token = c.issue("example.com", CLIENT, NOW);
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
        let token = c.issue("example.com", CLIENT, NOW);
        let wrong = (0..)
            .find(|n| {
                let d = Sha256::digest(format!("{token}:{n}"));
                leading_zero_bits(&d) < 20
            })
            .unwrap();
        let sub = Submission {
            token,
            counter: Some(wrong.to_string()),
            answer: None,
        };
        assert_eq!(
            c.verify("example.com", CLIENT, &sub, NOW),
            Err(Refusal::WrongWork)
        );
    }

    #[test]
    fn the_question_fallback_needs_the_right_sum_and_a_moment() {
        let c = challenges(16);
        let token = c.issue("example.com", CLIENT, NOW);
        let nonce = token.split('.').nth(3).unwrap();
        let (a, b) = c.question(nonce);
        let text = c.question_text(&token);
        assert!(text.contains(NUMBER_WORDS[usize::from(a - 1)]));
        let answer = |n: u32| Submission {
            token: token.clone(),
            counter: None,
            answer: Some(n.to_string()),
        };
        let right = u32::from(a) + u32::from(b);
        assert_eq!(
            c.verify("example.com", CLIENT, &answer(right), NOW),
            Err(Refusal::TooFast)
        );
        assert_eq!(
            c.verify("example.com", CLIENT, &answer(right + 1), NOW + 3),
            Err(Refusal::WrongAnswer)
        );
        assert!(
            c.verify("example.com", CLIENT, &answer(right), NOW + 3)
                .is_ok()
        );
    }

    #[test]
    fn ipv6_clients_are_bound_by_their_64() {
        let c = challenges(8);
        let a: IpAddr = "2001:db8:1:2::10".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::10".parse().unwrap();
        let pass = c.pass("example.com", a, NOW + 60);
        let cookie = format!("{PASS_COOKIE}={pass}");
        let state = |ip| c.pass_state([cookie.as_bytes()], "example.com", ip, NOW);
        assert_eq!(state(b), ChallengePass::Valid);
        assert_eq!(state(other), ChallengePass::Invalid);
    }

    #[test]
    fn return_targets_stay_on_the_site() {
        assert_eq!(safe_return("/a?b=c"), "/a?b=c");
        assert_eq!(safe_return("//evil.example/"), "/");
        assert_eq!(safe_return("https://evil.example/"), "/");
        assert_eq!(safe_return("/\\evil.example"), "/");
    }
}
