//! The phases of one request, from the website lookup to the origin's response, and
//! the access-log line and metrics that record it.

use super::Gateway;
use super::access_log::AccessEntry;
use super::cache;
use super::challenge::{self, Challenges, PassKind, PassSite, Submission};
use super::connection::ConnectionInfo;
use super::custom_rules::{CUSTOM_DECIDER, RuleSubject};
use super::forwarding;
use super::host_name::request_host;
use super::io::{Activity, ActivityCount};
use super::limits::Verdict;
use super::metrics::{CacheLabels, OriginLabels};
use super::outcome::{CacheStatus, Outcome};
use super::pages::{self, Body};
use super::service::{RequestBody, RequestHandler};
use super::traffic::Decided;
use super::upstream::UpstreamError;
use crate::client::{BehaviourCounts, ClientFacts, PassState};
use crate::report::Report;
use crate::rules::{Decision, decide, decide_observed, facts};
use botgate_model::custom_rules::RuleOutcome;
use botgate_model::{Action, Category, CertsIssuer, Status};
use botgate_store::WebsiteRecord;
use http::{HeaderValue, Method, Request, Response, StatusCode, Version, header};
use http_body_util::{BodyExt, Limited};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What the access log and the metrics say of one request.
struct Record {
    /// When the request's head had been read.
    started: Instant,
    /// The website the request is for, once its host name was found.
    website: Option<Arc<WebsiteRecord>>,
    /// The decided category, when a decision was made.
    category: Option<Category>,
    action: Outcome,
    decider: Option<(Arc<str>, Arc<str>)>,
    reason: String,
    origin: Option<std::net::SocketAddr>,
    cache: CacheStatus,
    /// Whether the answer advertises HTTP/3 (`Alt-Svc`).
    advertise_http3: bool,
}

impl Record {
    fn new(started: Instant) -> Record {
        Record {
            started,
            website: None,
            category: None,
            action: Outcome::Pass,
            decider: None,
            reason: String::new(),
            origin: None,
            cache: CacheStatus::NotAsked,
            advertise_http3: false,
        }
    }
}

/// A website's key in the per-website state (rate limits, behaviour counters).
fn site_key(domain: &str) -> u64 {
    foldhash::quality::FixedState::with_seed(0).hash_one(domain)
}

fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl RequestHandler for Gateway {
    /// Serves one request through every phase; never fails (every failure is a page).
    async fn handle<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
    ) -> Response<Body> {
        let started = Instant::now();
        let method = request.method().clone();
        // A reference-counted copy, not a new string.
        let target = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        // A reference-counted copy, for the website's statistics.
        let user_agent = request.headers().get(header::USER_AGENT).cloned();
        let mut record = Record::new(started);
        let mut response = self.phases(request, connection, &mut record).await;
        if record.advertise_http3
            && let Some(alt_svc) = &self.alt_svc
        {
            response
                .headers_mut()
                .insert(header::ALT_SVC, alt_svc.clone());
        }
        let elapsed = started.elapsed();
        let status = response.status().as_u16();
        self.config.access_log.record(&AccessEntry {
            website: record.website.as_ref().map(|w| w.website.domain.as_str()),
            client: &connection.client_text,
            method: method.as_str(),
            target: target.as_str(),
            category: record.category,
            action: record.action,
            decider: record
                .decider
                .as_ref()
                .map(|(name, version)| (name.as_ref(), version.as_ref())),
            reason: &record.reason,
            status,
            origin: record.origin,
            cache: record.cache,
            latency_us: elapsed.as_micros() as u64,
            ja4: connection.tls.as_ref().map(|t| t.ja4.as_str()),
        });
        if let Some(website) = &record.website {
            self.traffic.record(&Decided {
                website: website.website.domain.as_str(),
                owner: website.owner(),
                time_ms: unix_now_ms(),
                category: record.category,
                outcome: record.action,
                decider: record.decider.as_ref().map(|(name, _)| name.as_ref()),
                reason: &record.reason,
                client: connection.client.ip(),
                client_text: &connection.client_text,
                method: method.as_str(),
                target: target.as_str(),
                user_agent: user_agent.as_ref().map(HeaderValue::as_bytes),
                status,
                // A `captcha` decision for a client with a pass goes on to the origin.
                passed_on: record.origin.is_some() || record.cache == CacheStatus::Hit,
            });
        }
        // A decision was made when a category was decided or a custom rule acted.
        let decision = (record.category.is_some() || record.decider.is_some()).then(|| {
            let decider = record
                .decider
                .as_ref()
                .map_or("none", |(name, _)| name.as_ref());
            (decider, record.reason.as_str())
        });
        self.metrics.requests.record(
            record
                .website
                .as_ref()
                .map_or("-", |w| w.website.domain.as_str()),
            record.category.map_or("none", Category::as_str),
            record.action.as_str(),
            elapsed,
            decision,
        );
        response
    }
}

impl Gateway {
    /// Whether `host` (canonical) is the name of a website, whatever its status.
    /// Whether `host` is a name of a website whose ACME certificate is due or being
    /// issued (as this gateway's snapshot says).
    pub(super) fn awaits_acme_certificate(&self, host: &str) -> bool {
        self.websites
            .current()
            .by_host(host)
            .is_some_and(|website| website.website.awaits_acme_certificate(unix_now() as i64))
    }

    async fn phases<B: RequestBody>(
        &self,
        mut request: Request<B>,
        connection: &ConnectionInfo,
        record: &mut Record,
    ) -> Response<Body> {
        // Phase 1: the website.
        let Some(host) = request_host(&request) else {
            record.action = Outcome::BadRequest;
            return pages::missing_host();
        };
        // A request the gateway forwarded itself has come back: a website's origin
        // leads to the gateway. Stopped before it costs anything more.
        if self.via.seen_in(request.headers()) {
            record.action = Outcome::Loop;
            return pages::loop_detected();
        }
        // The rule sets read the path as the origin's server resolves it; a path with
        // no single such reading is served to nobody.
        if let Some(refusal) = botgate_normalise::refusal(request.uri().path()) {
            record.action = Outcome::BadRequest;
            return pages::path_refused(refusal);
        }
        // A mounted name's (the API's) ACME HTTP-01 request, let through by the HTTPS
        // redirect: answered while its certificate is awaited, whatever website the
        // store may hold under that name.
        let acme_token = request.uri().path().strip_prefix(super::ACME_HTTP01_PREFIX);
        if let Some(token) = acme_token
            && self.host_certificates.is_reserved(&host)
        {
            record.action = Outcome::AcmeChallenge;
            let awaited = matches!(*request.method(), Method::GET | Method::HEAD)
                && self.host_certificates.awaits(&host);
            return self.acme_http01(token, awaited).await;
        }
        let index = self.websites.current();
        let Some(website) = index.by_host(&host).cloned() else {
            record.action = Outcome::UnknownHost;
            return pages::unknown_host(&host);
        };
        drop(index);
        let domain = website.website.domain.as_str();
        record.website = Some(website.clone());
        // ACME HTTP-01 answers, for any website taking its certificate from ACME
        // whatever its status (it may still be in `setup`), before anything else can
        // redirect or refuse the CA. The store is asked only for a website whose
        // issuance is due or under way (as every gateway's snapshot says): a name that
        // is no website's got its 404 above, and another website's challenge path costs
        // no store read either. A website with the partner's own certificate gets its
        // challenge paths from its origin (its owner may validate there).
        if let Some(token) = acme_token
            && matches!(*request.method(), Method::GET | Method::HEAD)
            && self.acme_answers.is_some()
            && website.website.settings.loadbalancer.certs_issuer == CertsIssuer::Acme
        {
            record.action = Outcome::AcmeChallenge;
            let awaited = website.website.awaits_acme_certificate(unix_now() as i64);
            return self.acme_http01(token, awaited).await;
        }
        let lb = &website.website.settings.loadbalancer;
        let paused = website.website.status == Status::Paused;
        if connection.http3 && !lb.enable_http3 {
            record.action = Outcome::Misdirected;
            return pages::misdirected();
        }
        record.advertise_http3 = lb.enable_http3 && connection.https && !connection.http3;
        let client = connection.client.ip();
        let site = site_key(domain);

        // Phase 2: the gateway's own answers and redirects.
        if matches!(*request.method(), Method::TRACE | Method::CONNECT) {
            record.action = Outcome::Refused;
            return pages::method_refused(request.method());
        }
        if request.uri().path() == challenge::VERIFY_PATH && request.method() == Method::POST {
            if let Err(retry_after) = self.ddos.answer(client) {
                record.action = Outcome::Limited;
                return pages::too_many_requests(retry_after);
            }
            return self
                .verify_challenge(request, &website, connection, site, record)
                .await;
        }
        // Neither the rules nor the origin see the gateway's own cookies.
        let sent_cookies = challenge::take_pass_cookies(request.headers_mut());

        let target = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        if lb.force_https && !connection.https {
            record.action = Outcome::Redirect;
            return pages::moved_permanently(&format!("https://{host}{target}"));
        }
        if lb.force_subdomains_redirect && host != domain {
            record.action = Outcome::Redirect;
            let scheme = if connection.https { "https" } else { "http" };
            return pages::moved_permanently(&format!("{scheme}://{domain}{target}"));
        }

        // Phase 3: rate limits.
        let mut under_attack = false;
        if !paused && (lb.ddos_protection || lb.ddos_protection_advanced) {
            match self.ddos.check(site, client, lb.ddos_protection_advanced) {
                Verdict::Pass => {}
                Verdict::UnderAttack => under_attack = true,
                Verdict::Limited { retry_after } => {
                    record.action = Outcome::Limited;
                    return pages::too_many_requests(retry_after);
                }
                // Over the website's rate, not the client's: a client that has shown
                // itself draws on the share kept for such clients, a new one is
                // challenged (and comes back with a pass).
                Verdict::WebsiteBusy => {
                    if !self.pass_of(&sent_cookies, &website, client).holds() {
                        record.action = Outcome::Captcha;
                        let challenge = NewChallenge::for_target(target);
                        return self.challenge_page(challenge, connection, domain, site);
                    }
                    if let Err(retry_after) = self.ddos.reserved(site) {
                        record.action = Outcome::Busy;
                        return pages::website_busy(retry_after);
                    }
                }
            }
        }

        // Phase 4: the decision.
        if !paused && (lb.bot_protection || under_attack) {
            // The components read the target and the headers up to bounds: more would
            // reach the origin unread (a payload after 16 KiB of filler, a `Cookie`
            // after two headers of 8 KiB, the end of a value past 8 KiB).
            if lb.bot_protection && !lb.monitoring_mode {
                let uri = request.uri();
                let target_len = uri
                    .path_and_query()
                    .map_or(0, |target| target.as_str().len());
                if target_len > facts::MAX_TARGET_BYTES {
                    record.action = Outcome::BadRequest;
                    return pages::target_too_long(facts::MAX_TARGET_BYTES);
                }
                let headers = || {
                    request
                        .headers()
                        .iter()
                        .map(|(name, value)| (name.as_str(), value.as_bytes()))
                };
                if !facts::headers_fit(&host, headers) {
                    record.action = Outcome::BadRequest;
                    return pages::headers_too_large();
                }
            }
            let pass = self.pass_of(&sent_cookies, &website, client);
            let mut action = Action::Grant;
            if lb.bot_protection {
                let behaviour =
                    self.behaviour
                        .record(site, client, request.uri().path(), record.started);
                let settings = &website.website.settings;
                let custom = (!settings.custom_rules.is_empty())
                    .then(|| {
                        let subject = RuleSubject::new(&request, &host, connection, &self.geoip);
                        // Servlet containers drop `;` parameters (`/admin;x/panel`
                        // is their `/admin/panel`): the rules read both ways.
                        let servlet = botgate_normalise::without_parameters(subject.path);
                        let servlet = servlet.as_deref().map(|p| subject.reading_path(p));
                        let policy = settings.rules.policy();
                        let action_of = |outcome| match outcome {
                            RuleOutcome::Action(action) => action,
                            RuleOutcome::Category(category) => policy.action(category),
                        };
                        match &servlet {
                            Some(servlet) => settings
                                .custom_rules
                                .first_match(&[&subject, servlet], action_of),
                            None => settings.custom_rules.first_match(&[&subject], action_of),
                        }
                    })
                    .flatten();
                if let Some(rule) = custom {
                    (record.category, action) = match rule.outcome {
                        RuleOutcome::Action(action) => (None, action),
                        RuleOutcome::Category(category) => {
                            (Some(category), settings.rules.policy().action(category))
                        }
                    };
                    record.decider = Some(CUSTOM_DECIDER.clone());
                    record.reason = rule.reason.to_owned();
                } else {
                    let decision = self
                        .decide(&request, &host, connection, &website, behaviour, pass)
                        .await;
                    record.category = Some(decision.category);
                    action = decision.action;
                    record.decider = decision.decided_by.map(|d| (d.name, d.version));
                    record.reason = decision.reason;
                }
            }
            // Monitoring mode records what the policy would do and lets the request
            // through; the under-attack challenge is flood protection's, and stays.
            record.action = action.into();
            if lb.bot_protection && lb.monitoring_mode {
                record.action = Outcome::monitored(action);
                action = Action::Grant;
            }
            if under_attack && action == Action::Grant {
                action = Action::Captcha;
                record.action = Outcome::Captcha;
            }
            match action {
                Action::Deny => return pages::denied(),
                Action::Captcha if !pass.holds() => {
                    let challenge = NewChallenge::for_target(target);
                    return self.challenge_page(challenge, connection, domain, site);
                }
                Action::Captcha | Action::Grant => {}
            }
        }

        // Phase 5: the origin.
        self.forward(request, &host, &website, connection, record)
            .await
    }

    /// The answer to an ACME HTTP-01 request for `token`: the key authorization when
    /// an issuance is `awaited` for the name and the store has one, else 404.
    async fn acme_http01(&self, token: &str, awaited: bool) -> Response<Body> {
        let answer = match (&self.acme_answers, awaited) {
            (Some(answers), true) => answers.http01(token).await,
            _ => None,
        };
        match answer {
            Some(answer) => {
                let mut response = Response::new(pages::full(answer));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/octet-stream"),
                );
                response
            }
            None => pages::page(
                StatusCode::NOT_FOUND,
                "No such challenge",
                "No certificate issuance is waiting for this token.",
            ),
        }
    }

    /// Whether the request's `Cookie` fields as sent carry a valid pass for `website`
    /// and `client`.
    fn pass_of(
        &self,
        sent_cookies: &[HeaderValue],
        website: &WebsiteRecord,
        client: std::net::IpAddr,
    ) -> PassState {
        self.challenges.pass_state(
            sent_cookies.iter().map(|v| v.as_bytes()),
            PassSite::of(website),
            client,
            unix_now(),
        )
    }

    /// Checks a crawler claim (which may look up DNS) and runs the rule engine.
    async fn decide<B: RequestBody>(
        &self,
        request: &Request<B>,
        host: &str,
        connection: &ConnectionInfo,
        website: &WebsiteRecord,
        behaviour: BehaviourCounts,
        pass: PassState,
    ) -> Decision {
        let client = connection.client.ip();
        let user_agent = request.headers().get(header::USER_AGENT);
        let crawler = self
            .crawlers
            .verify(user_agent.map(|v| v.as_bytes()), client)
            .await;
        let uri = request.uri();
        let path = uri.path();
        let parts = facts::RequestParts {
            method: request.method().as_str(),
            https: connection.https,
            host,
            path,
            query: uri.query().unwrap_or(""),
            version: request.version(),
            headers: request
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
            client_ip: client,
        };
        let known = ClientFacts {
            tls: connection.tls.as_ref(),
            crawler,
            pass,
            behaviour,
        };
        let facts = facts::request_facts(parts, &known);
        let settings = &website.website.settings;
        let mut enabled: smallvec::SmallVec<[&str; 9]> = smallvec::SmallVec::new();
        settings.rulesets.enabled_into(&mut enabled);
        let set = self.rulesets.current();
        let policy = settings.rules.policy();
        if !self.shadows.any() {
            return decide(&set, &facts, &enabled, policy);
        }
        // Versions in shadow: compared, on their share, with what the active versions
        // said here.
        let seen = self.shadows.count_request();
        let mut judged = smallvec::SmallVec::<[_; 2]>::new();
        let decision = decide_observed(&set, &facts, &enabled, policy, |component, outcome| {
            if !matches!(outcome, crate::rules::Outcome::OutOfScope)
                && self.shadows.wants(component.name(), seen)
            {
                judged.push((component, outcome.clone()));
            }
        });
        let method = request.method().as_str();
        self.shadows.observe(&judged, &facts, host, method);
        decision
    }

    /// The challenge page, counted as a failed challenge until solved.
    fn challenge_page(
        &self,
        challenge: NewChallenge<'_>,
        connection: &ConnectionInfo,
        domain: &str,
        site: u64,
    ) -> Response<Body> {
        let client = connection.client.ip();
        let now = unix_now();
        let token = match challenge.token {
            Some(token) => token.to_owned(),
            None => {
                self.behaviour.challenge_served(site, client);
                // Harder while the website is under pressure, for every new token (a
                // refused answer's next one too).
                let difficulty = self.challenges.difficulty(self.ddos.under_pressure(site));
                self.challenges.issue(domain, client, now, difficulty)
            }
        };
        let return_to = challenge::safe_return(challenge.target);
        let offer_wait =
            challenge.offer_wait && self.challenges.config().waits_per_client_per_hour > 0;
        let page = self
            .challenges
            .page(&token, return_to, challenge.note, now, offer_wait);
        pages::html(StatusCode::FORBIDDEN, page)
    }

    /// Checks a posted challenge answer; on success sets the pass and goes back.
    async fn verify_challenge<B: RequestBody>(
        &self,
        request: Request<B>,
        website: &WebsiteRecord,
        connection: &ConnectionInfo,
        site: u64,
        record: &mut Record,
    ) -> Response<Body> {
        let domain = website.website.domain.as_str();
        let client = connection.client.ip();
        // A few hundred bytes that a browser sends at once: a sender slower than the
        // header-read timeout is not answering a challenge.
        let reading = Limited::new(request.into_body(), 8 * 1024).collect();
        let body = match tokio::time::timeout(self.config.limits.header_read_timeout, reading).await
        {
            Ok(Ok(body)) => body.to_bytes(),
            Ok(Err(_)) => {
                record.action = Outcome::BadRequest;
                return pages::page(
                    StatusCode::BAD_REQUEST,
                    "Bad request",
                    "The challenge answer could not be read.",
                );
            }
            Err(_) => {
                record.action = Outcome::BadRequest;
                return pages::page(
                    StatusCode::REQUEST_TIMEOUT,
                    "Request timeout",
                    "The challenge answer did not arrive in time.",
                );
            }
        };
        let mut submission = Submission::default();
        let mut return_to = String::from("/");
        for (key, value) in form_urlencoded::parse(&body) {
            match key.as_ref() {
                "token" => submission.token = value.into_owned(),
                "counter" => submission.counter = Some(value.into_owned()),
                "wait" => submission.waited = value == "1",
                "return" => return_to = value.into_owned(),
                _ => {}
            }
        }
        let return_to = challenge::safe_return(&return_to).to_owned();
        let now = unix_now();
        let verified = self.verified_pass(website, client, &submission, now).await;
        match verified {
            Ok((pass, kind)) => {
                record.action = Outcome::ChallengeSolved;
                self.behaviour.challenge_solved(site, client);
                let mut response = Response::new(pages::empty());
                *response.status_mut() = StatusCode::SEE_OTHER;
                let headers = response.headers_mut();
                if let Ok(location) = HeaderValue::from_str(&return_to) {
                    headers.insert(header::LOCATION, location);
                }
                let cookie = self.challenges.pass_cookie(&pass, kind, connection.https);
                if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                    headers.insert(header::SET_COOKIE, cookie);
                }
                headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                response
            }
            Err(refusal) => {
                record.action = Outcome::ChallengeFailed;
                record.reason = refusal.to_string();
                let mut challenge = NewChallenge::for_target(&return_to);
                let note = match refusal {
                    // Too early is no reason to start the wait again: the same token.
                    challenge::Refusal::TooFast => {
                        challenge.token = Some(submission.token.as_str());
                        let left = Challenges::seconds_left(&submission.token, unix_now());
                        format!("Not yet: please wait {left} more seconds, then continue.")
                    }
                    challenge::Refusal::TooManyWaits => {
                        challenge.offer_wait = false;
                        format!("That did not work: {refusal}.")
                    }
                    other => format!("That did not work: {other}. Please try again."),
                };
                challenge.note = Some(&note);
                self.challenge_page(challenge, connection, domain, site)
            }
        }
    }

    /// Verifies a submission, spends its token (one pass per token, across the
    /// cluster, kept spent until it would expire) and counts a wait against the
    /// client's hourly allowance; the pass earned and its kind.
    async fn verified_pass(
        &self,
        website: &WebsiteRecord,
        client: std::net::IpAddr,
        submission: &Submission,
        now: u64,
    ) -> Result<(String, PassKind), challenge::Refusal> {
        let domain = website.website.domain.as_str();
        let kind = self.challenges.verify(domain, client, submission, now)?;
        // Read now, not held across the store's answers (a reload may swap it).
        let (solve_within, waits_per_hour) = {
            let config = self.challenges.config();
            (config.solve_within, config.waits_per_client_per_hour)
        };
        let until = now + solve_within.as_secs() + 60;
        if !self
            .ledger
            .spend(&submission.token, until.saturating_mul(1000))
            .await
        {
            return Err(challenge::Refusal::Spent);
        }
        if kind == PassKind::Waited {
            let hour_ends = (now + 3600).saturating_mul(1000);
            let waits = self.ledger.count_wait(domain, client, hour_ends).await;
            if waits > u64::from(waits_per_hour) {
                return Err(challenge::Refusal::TooManyWaits);
            }
        }
        let site = PassSite::of(website);
        Ok((self.challenges.issue_pass(site, client, kind, now), kind))
    }

    /// Sends the request to an origin and streams its answer back.
    async fn forward<B: RequestBody>(
        &self,
        mut request: Request<B>,
        host: &str,
        website: &WebsiteRecord,
        connection: &ConnectionInfo,
        record: &mut Record,
    ) -> Response<Body> {
        let upgrade = request.version() == Version::HTTP_11
            && forwarding::is_websocket_upgrade(request.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        // Out before the cache looks: `Vary` matches what the origin is sent.
        forwarding::remove_hop_by_hop(&mut parts.headers, upgrade);
        let lb = &website.website.settings.loadbalancer;
        // A cache miss's key, kind and request head, kept to store a GET's answer.
        let mut to_store = None;
        let cacheable = cache::cacheable(&parts, lb.cache_static_files, lb.cache_dynamic_pages);
        // A body (some frameworks read a GET's as a form) makes another answer.
        let bodiless = body.is_end_stream() || body.size_hint().exact() == Some(0);
        if let Some(kind) = cacheable.filter(|_| !upgrade && bodiless) {
            let key = cache::Key::new(connection.https, host, website.owner(), &parts);
            let found = self.cache.lookup(&key, &parts);
            let result = if found.is_some() {
                CacheStatus::Hit
            } else {
                CacheStatus::Miss
            };
            record.cache = result;
            self.metrics
                .cache_lookups
                .get_or_create(&CacheLabels {
                    result: result.as_str(),
                })
                .inc();
            if let Some(hit) = found {
                return hit;
            }
            if parts.method == Method::GET {
                to_store = Some((key, kind, cache::request_head(&parts)));
            }
        }
        let target = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        let mut origin_request = Request::new(body.map_err(Into::into).boxed_unsync());
        *origin_request.method_mut() = parts.method;
        *origin_request.uri_mut() = http::Uri::from(target);
        *origin_request.version_mut() = Version::HTTP_11;
        let mut headers = parts.headers;
        self.via.append(&mut headers, parts.version);
        forwarding::add_forwarded(
            &mut headers,
            &connection.client_text,
            connection.https,
            host,
        );
        // The Host the origin sees is the website's name as the client wrote it, in
        // the canonical form (no port, lower case): most clients already send that.
        if headers
            .get(header::HOST)
            .is_none_or(|sent| sent.as_bytes() != host.as_bytes())
        {
            headers.insert(
                header::HOST,
                HeaderValue::from_str(host).unwrap_or(HeaderValue::from_static("invalid")),
            );
        }
        *origin_request.headers_mut() = headers;

        let tls_name = lb.upstreams_use_https.then_some(host);
        let sent = self
            .origins
            .send(&website.website.ip, tls_name, origin_request, upgrade)
            .await;
        let origin = match sent {
            Ok(origin) => origin,
            Err(err @ UpstreamError::Request { .. }) => {
                let reason = Report(&err);
                tracing::debug!(website = %website.website.domain, %reason, "request not sent whole");
                record.action = Outcome::BadRequest;
                return pages::page(
                    StatusCode::BAD_REQUEST,
                    "Bad request",
                    "The request's body did not arrive whole.",
                );
            }
            Err(err) => {
                let (kind, page) = match &err {
                    UpstreamError::Timeout { .. } => ("timeout", pages::gateway_timeout()),
                    UpstreamError::NoOrigin | UpstreamError::Unreachable { .. } => {
                        ("unreachable", pages::bad_gateway())
                    }
                    UpstreamError::Refused { .. } => ("refused", pages::origin_refused()),
                    UpstreamError::Failed { .. } | UpstreamError::Request { .. } => {
                        ("failed", pages::bad_gateway())
                    }
                };
                let error = Report(&err);
                tracing::warn!(website = %website.website.domain, %error, "origin failed");
                self.metrics
                    .origin_failures
                    .get_or_create(&OriginLabels { kind })
                    .inc();
                return page;
            }
        };
        record.origin = Some(origin.origin);
        let mut response = origin.response;
        if let Some(origin_end) = origin.upgraded {
            if let Some(client_upgrade) = client_upgrade {
                let idle_timeout = self.config.limits.idle_timeout;
                tokio::spawn(async move {
                    match client_upgrade.await {
                        Ok(client) => tunnel(client, origin_end, idle_timeout).await,
                        Err(err) => tracing::debug!(%err, "WebSocket upgrade failed"),
                    }
                });
            }
        } else {
            forwarding::remove_hop_by_hop(response.headers_mut(), false);
            // A 204 has no body and no length (RFC 9110 §8.6): one an origin sent would
            // mislead an intermediary that believes it, and is malformed over HTTP/2.
            if response.status() == StatusCode::NO_CONTENT {
                response.headers_mut().remove(header::CONTENT_LENGTH);
            }
        }
        // A proxy names itself in the responses it forwards too (RFC 9110, 7.6.3).
        let version = response.version();
        self.via.append(response.headers_mut(), version);
        let mut response = response.map(|body| body.map_err(Into::into).boxed_unsync());
        if record.cache == CacheStatus::Miss {
            response
                .headers_mut()
                .insert(cache::CACHE_HEADER, HeaderValue::from_static("miss"));
        }
        match to_store {
            Some((key, kind, head)) => self.cache.store(key, kind, &head, response),
            None => response,
        }
    }
}

/// Relays an upgraded connection (a WebSocket) both ways until either side closes it,
/// or until no byte has moved either way for `idle_timeout`, as the listener closes a
/// quiet connection (WebSocket applications ping more often than that).
async fn tunnel(
    client: hyper::upgrade::Upgraded,
    mut origin: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    idle_timeout: std::time::Duration,
) {
    // Every byte either way passes the client's side: counting there is enough.
    let activity = ActivityCount::new();
    let mut client = Activity::new(hyper_util::rt::TokioIo::new(client), activity.clone());
    let relay = tokio::io::copy_bidirectional(&mut client, &mut origin);
    tokio::pin!(relay);
    let mut check = tokio::time::interval(idle_timeout / 4);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    check.tick().await;
    let mut idle = activity.watch(Instant::now());
    loop {
        tokio::select! {
            _ = &mut relay => return,
            _ = check.tick() => {
                if idle.quiet_for(Instant::now()) >= idle_timeout {
                    tracing::debug!("WebSocket tunnel quiet past the idle timeout; closed");
                    return;
                }
            }
        }
    }
}

/// A challenge page to serve: where to return once solved, and either a new token
/// (harder while the website is under pressure) or the one the client still holds.
struct NewChallenge<'a> {
    target: &'a str,
    /// The token whose wait goes on, instead of a new one.
    token: Option<&'a str>,
    note: Option<&'a str>,
    /// Whether browsers without JavaScript are offered the wait.
    offer_wait: bool,
}

impl<'a> NewChallenge<'a> {
    fn for_target(target: &'a str) -> Self {
        NewChallenge {
            target,
            token: None,
            note: None,
            offer_wait: true,
        }
    }
}
