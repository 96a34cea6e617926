//! The website resource: its fields, its status, and how a create or an update
//! (the specification's PUT: only the keys sent change) is checked and applied.

use crate::certificate::{self, Certificate};
use crate::invalid::Invalid;
use crate::names::{self, Domain, Subdomain, UserId};
use crate::settings::{CertsIssuer, Settings, SettingsPatch};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::SystemTime;

/// Where a website stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Asynchronous work is pending (DNS, certificate).
    Setup,
    /// Protected and serving.
    Online,
    /// Protection off: traffic passes to the origin unprotected.
    Paused,
    /// Asynchronous work failed; `status_reason` says why.
    Error,
}

impl Status {
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Setup => "setup",
            Status::Online => "online",
            Status::Paused => "paused",
            Status::Error => "error",
        }
    }
}

/// A website as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Website {
    pub domain: Domain,
    pub subdomain: Vec<Subdomain>,
    pub user_id: UserId,
    pub ip: Vec<IpAddr>,
    pub tag: Vec<String>,
    pub status: Status,
    pub status_reason: Option<String>,
    pub certificate: Option<Certificate>,
    pub settings: Settings,
    /// Asynchronous work under way (status `setup`); stored, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// What a website in `setup` waits for the end of: since when, and whom to tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// When the work began, in milliseconds since the Unix epoch.
    pub since_ms: u64,
    /// The `callbackUrl`s of the creates and changes that wait for it, in order.
    pub callbacks: Vec<String>,
    /// A certificate must be issued (ACME) before the work is done, whatever
    /// certificate the website holds now (a partner's, until the switch to ACME).
    #[serde(default)]
    pub issue_certificate: bool,
    /// The partner created the website in `setup` and has not yet asked for `online`:
    /// the end of the work leaves it in `setup`.
    #[serde(default)]
    pub held: bool,
    /// The DNS and certificate work is done; only the partner's hold remains.
    #[serde(default)]
    pub work_done: bool,
}

/// Why a website waits in `setup` once its work is done.
const HELD: &str = "held in `setup` until the partner asks for `online`";

/// The fields of a create or an update as the partner sent them, already split into
/// lists (from JSON arrays or comma-separated form values) but not yet checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WebsiteInput {
    pub domain: Option<String>,
    pub subdomain: Option<Vec<String>>,
    pub user_id: Option<String>,
    pub ip: Option<Vec<String>>,
    /// IPv6 origin addresses sent apart from `ip`, as GateKeeper clients do.
    pub ipv6: Option<Vec<String>>,
    pub tag: Option<Vec<String>>,
    pub status: Option<String>,
    pub certificate: Option<Certificate>,
    pub settings: Option<serde_json::Value>,
}

/// The status a partner may ask for: `online`, `paused`, or (on create) `setup`;
/// `error` is the gateway's to set.
fn requested_status(input: &Option<String>) -> Result<Option<Status>, Invalid> {
    match input.as_deref().map(str::trim) {
        None => Ok(None),
        Some("online") => Ok(Some(Status::Online)),
        Some("paused") => Ok(Some(Status::Paused)),
        Some("setup") => Ok(Some(Status::Setup)),
        Some(other) => Err(Invalid::unacceptable(
            "status",
            format!(
                "a website can be asked to be `online` or `paused` (or `setup` when it is \
                 created), not `{}`",
                names::shorten(other)
            ),
        )),
    }
}

/// The origin list after `ip` and `ipv6` are sent: `ip` replaces the list, `ipv6`
/// replaces its IPv6 addresses (and adds to `ip`'s when both are sent).
fn origins(
    current: &[IpAddr],
    ip: Option<Vec<String>>,
    ipv6: Option<Vec<String>>,
) -> Result<Vec<IpAddr>, Invalid> {
    let ip_sent = ip.is_some();
    let mut list = match ip {
        Some(ip) => names::origin_ips("ip", ip)?,
        None => current.to_vec(),
    };
    if let Some(ipv6) = ipv6 {
        let ipv6 = names::origin_ips("ipv6", ipv6)?;
        if let Some(v4) = ipv6.iter().find(|address| address.is_ipv4()) {
            return Err(Invalid::malformed(
                "ipv6",
                format!("`{v4}` is an IPv4 address; send it in `ip`"),
            ));
        }
        if !ip_sent {
            list.retain(IpAddr::is_ipv4);
        }
        for address in ipv6 {
            if !list.contains(&address) {
                list.push(address);
            }
        }
        if list.len() > names::MAX_ORIGINS {
            return Err(Invalid::unacceptable(
                "ipv6",
                format!(
                    "`ip` and `ipv6` name {} origin addresses; at most {} are allowed",
                    list.len(),
                    names::MAX_ORIGINS
                ),
            ));
        }
    }
    if list.is_empty() {
        return Err(Invalid::malformed(
            "ip",
            "at least one origin address (IPv4 or IPv6) is required",
        ));
    }
    Ok(list)
}

impl Website {
    /// Checks a create and builds the website: `domain`, `user_id` and at least one
    /// origin address (`ip`, `ipv6`) are required; every other field takes its default.
    /// A website asked to be `paused` is paused; one asked to be `setup` stays in
    /// `setup` until asked to be `online`; otherwise it is online as soon as nothing is
    /// pending.
    pub fn create(input: WebsiteInput) -> Result<Website, Invalid> {
        let domain = Domain::parse(input.domain.as_deref().ok_or(Invalid::missing("domain"))?)?;
        if domain.is_public_suffix() {
            return Err(Invalid::unacceptable(
                "domain",
                format!(
                    "`{domain}` is a public suffix (as `com`, `co.uk` or `github.io` are): \
                     names under it belong to many owners; create the website for a domain \
                     registered under it"
                ),
            ));
        }
        let user_id = UserId::parse(
            input
                .user_id
                .as_deref()
                .ok_or(Invalid::missing("user_id"))?,
        )
        .map_err(|e| e.at("user_id"))?;
        let ip = origins(&[], input.ip.clone(), input.ipv6.clone())?;
        let hold = requested_status(&input.status)? == Some(Status::Setup);
        let mut website = Website {
            domain,
            subdomain: Vec::new(),
            user_id,
            ip,
            tag: Vec::new(),
            status: Status::Online,
            status_reason: None,
            certificate: None,
            settings: Settings::default(),
            pending: None,
        };
        // A certificate sent without an issuer means the partner's own certificate.
        if input.certificate.is_some() {
            website.settings.loadbalancer.certs_issuer = CertsIssuer::Custom;
        }
        website.apply(WebsiteInput {
            domain: None,
            user_id: None,
            ip: None,
            ipv6: None,
            status: if hold { None } else { input.status },
            ..input
        })?;
        if hold {
            website.status = Status::Setup;
            website.status_reason = Some(HELD.to_owned());
            website.pending = Some(Pending {
                since_ms: SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_millis() as u64),
                callbacks: Vec::new(),
                issue_certificate: false,
                held: true,
                work_done: true,
            });
        }
        Ok(website)
    }

    /// Checks an update and applies it: only the fields sent change, only the keys
    /// sent inside `settings` change, a list sent replaces the list. Nothing changes
    /// when any field is refused. `domain` and `user_id` may be sent but not changed.
    pub fn apply(&mut self, input: WebsiteInput) -> Result<(), Invalid> {
        let mut next = self.clone();
        if let Some(domain) = &input.domain
            && Domain::parse(domain)? != self.domain
        {
            return Err(Invalid::unacceptable(
                "domain",
                "a website's domain cannot be changed; create a website for the new domain",
            ));
        }
        if let Some(user_id) = &input.user_id
            && UserId::parse(user_id).map_err(|e| e.at("user_id"))? != self.user_id
        {
            return Err(Invalid::unacceptable(
                "user_id",
                "a website cannot move to another user",
            ));
        }
        if let Some(subdomain) = input.subdomain {
            next.subdomain = names::subdomains(subdomain)?;
            let longest = next
                .subdomain
                .iter()
                .map(|s| next.domain.with_subdomain(s))
                .find(|full| full.len() > 253);
            if let Some(full) = longest {
                return Err(Invalid::malformed(
                    "subdomain",
                    format!("`{}` is longer than 253 bytes", names::shorten(&full)),
                ));
            }
        }
        if input.ip.is_some() || input.ipv6.is_some() {
            next.ip = origins(&self.ip, input.ip, input.ipv6)?;
        }
        if let Some(tag) = input.tag {
            next.tag = names::tags("tag", tag)?;
        }
        if let Some(settings) = &input.settings {
            SettingsPatch::parse(settings)?.apply(&mut next.settings)?;
        }
        let certificate_sent = input.certificate.is_some();
        if let Some(certificate) = input.certificate {
            next.certificate = Some(certificate);
        }
        let custom = next.settings.loadbalancer.certs_issuer == CertsIssuer::Custom;
        if custom && next.certificate.is_none() {
            return Err(Invalid::unacceptable(
                "certificate",
                "certs_issuer is `custom` but no certificate was sent; send `certificate` \
                 (`public` and `private`) or use `acme`",
            ));
        }
        // A certificate is checked when it arrives, and again when the partner's own
        // certificate must now cover other names or starts being used.
        let recheck = custom
            && (next.subdomain != self.subdomain
                || self.settings.loadbalancer.certs_issuer != CertsIssuer::Custom);
        if let Some(certificate) = &next.certificate
            && (certificate_sent || recheck)
        {
            certificate::check(certificate, &next.host_names(), SystemTime::now())?;
        }
        let requested = requested_status(&input.status)?;
        if requested == Some(Status::Online)
            && let Some(pending) = &mut next.pending
        {
            pending.held = false;
        }
        match requested {
            Some(Status::Setup) => {
                return Err(Invalid::unacceptable(
                    "status",
                    "a website can be asked to be `setup` only when it is created; it then \
                     waits in `setup` until asked to be `online`",
                ));
            }
            Some(Status::Paused) => {
                next.status = Status::Paused;
                next.status_reason = None;
            }
            Some(_) if next.status == Status::Paused => {
                // Work that was under way when the website was paused goes on.
                next.status = if next.pending.is_some() {
                    Status::Setup
                } else {
                    Status::Online
                };
            }
            _ => {}
        }
        *self = next;
        Ok(())
    }

    /// Starts (or restarts) asynchronous work: status `setup` with `reason`, from
    /// `now_ms`; callbacks already waiting keep waiting. A paused website stays paused,
    /// the work waiting until it is asked to be online again.
    pub fn begin_setup(&mut self, now_ms: u64, reason: String) {
        let (callbacks, issue_certificate, held) = self
            .pending
            .take()
            .map(|pending| (pending.callbacks, pending.issue_certificate, pending.held))
            .unwrap_or_default();
        if self.status != Status::Paused {
            self.status = Status::Setup;
            self.status_reason = Some(reason);
        }
        self.pending = Some(Pending {
            since_ms: now_ms,
            callbacks,
            issue_certificate,
            held,
            work_done: false,
        });
    }

    /// The `callbackUrl`s the website holds for the end of its work in `setup`.
    pub fn held_callbacks(&self) -> &[String] {
        self.pending
            .as_ref()
            .map_or(&[], |pending| pending.callbacks.as_slice())
    }

    /// Whether the website waits for DNS or a certificate (the provisioner's work).
    pub fn awaits_work(&self) -> bool {
        self.status == Status::Setup && self.pending.as_ref().is_some_and(|p| !p.work_done)
    }

    /// Ends asynchronous work: `online`, or `error` with the reason; the callbacks
    /// that waited for it. Work done on a website the partner holds in `setup` leaves
    /// it there, its callbacks still waiting.
    pub fn finish_setup(&mut self, outcome: Result<(), String>) -> Vec<String> {
        if outcome.is_ok()
            && let Some(pending) = self.pending.as_mut().filter(|pending| pending.held)
        {
            // The work (and any issuance) is over; only the hold remains.
            pending.work_done = true;
            pending.issue_certificate = false;
            self.status_reason = Some(HELD.to_owned());
            return Vec::new();
        }
        match outcome {
            Ok(()) => {
                self.status = Status::Online;
                self.status_reason = None;
            }
            Err(reason) => {
                self.status = Status::Error;
                self.status_reason = Some(reason);
            }
        }
        self.pending
            .take()
            .map(|pending| pending.callbacks)
            .unwrap_or_default()
    }

    /// Ends a setup whose work is done once the partner's hold is released (asked to be
    /// `online`): the callbacks that waited for it.
    pub fn settle(&mut self) -> Vec<String> {
        let done = self.status == Status::Setup
            && self
                .pending
                .as_ref()
                .is_some_and(|pending| pending.work_done && !pending.held);
        if done {
            self.finish_setup(Ok(()))
        } else {
            Vec::new()
        }
    }

    /// Whether the website needs a certificate now: it has none that covers its names
    /// and is readable, or (for renewal) a third or less of its lifetime remains.
    pub fn certificate_due(&self, now_s: i64) -> bool {
        self.certificate.as_ref().is_none_or(|certificate| {
            certificate::renewal_due(&certificate.public, &self.host_names(), now_s)
        })
    }

    /// Whether an ACME issuance for the website is due or under way (so a CA may come
    /// for its challenges): its issuer is ACME, and an issuance is pending or a
    /// certificate is due.
    pub fn awaits_acme_certificate(&self, now_s: i64) -> bool {
        self.settings.loadbalancer.certs_issuer == CertsIssuer::Acme
            && (self.pending.as_ref().is_some_and(|p| p.issue_certificate)
                || self.certificate_due(now_s))
    }

    /// Every host name the website answers for: the domain and each subdomain.
    pub fn host_names(&self) -> Vec<String> {
        std::iter::once(self.domain.as_str().to_owned())
            .chain(self.subdomain.iter().map(|s| self.domain.with_subdomain(s)))
            .collect()
    }

    /// The website as the API returns it and a webhook carries it: every field, the
    /// certificate without its private key.
    pub fn view(&self) -> WebsiteView {
        WebsiteView {
            domain: self.domain.as_str().to_owned(),
            subdomain: self
                .subdomain
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            user_id: self.user_id.as_str().to_owned(),
            ip: self.ip.iter().map(IpAddr::to_string).collect(),
            tag: self.tag.clone(),
            status: self.status,
            status_reason: self.status_reason.clone(),
            certificate: self
                .certificate
                .as_ref()
                .map(|c| CertificateView::of(&c.public)),
            settings: self.settings.clone(),
        }
    }
}

/// The website as the API and webhooks show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Website))]
pub struct WebsiteView {
    pub domain: String,
    pub subdomain: Vec<String>,
    pub user_id: String,
    pub ip: Vec<String>,
    pub tag: Vec<String>,
    pub status: Status,
    pub status_reason: Option<String>,
    pub certificate: Option<CertificateView>,
    pub settings: Settings,
}

/// A certificate as shown: the public bundle, and what its first certificate says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = CertificatePublic))]
pub struct CertificateView {
    /// The certificate bundle (PEM): the leaf first, then the chain.
    pub public: String,
    /// Who issued the leaf (organisation and common name).
    #[serde(default)]
    pub issuer: Option<String>,
    /// The DNS names the leaf covers.
    #[serde(default)]
    pub names: Vec<String>,
    /// When the leaf stops being valid, in seconds since the Unix epoch.
    #[serde(default)]
    pub not_after: Option<i64>,
}

impl CertificateView {
    /// The view of the bundle `public` (only `public` when it does not parse).
    pub fn of(public: &str) -> CertificateView {
        let summary = certificate::leaf_summary(public);
        CertificateView {
            public: public.to_owned(),
            issuer: summary.as_ref().map(|s| s.issuer.clone()),
            names: summary
                .as_ref()
                .map(|s| s.names.clone())
                .unwrap_or_default(),
            not_after: summary.map(|s| s.not_after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Action, Category};
    use serde_json::json;

    fn input(domain: &str) -> WebsiteInput {
        WebsiteInput {
            domain: Some(domain.into()),
            user_id: Some("alice@example.com".into()),
            ip: Some(vec!["192.0.2.10".into(), "2001:db8::10".into()]),
            ..WebsiteInput::default()
        }
    }

    #[test]
    fn a_minimal_create_takes_the_defaults_and_goes_online() {
        let site = Website::create(input("Example.com")).unwrap();
        assert_eq!(site.domain.as_str(), "example.com");
        assert_eq!(site.status, Status::Online);
        assert_eq!(site.settings, Settings::default());
        assert_eq!(site.ip.len(), 2);
        assert_eq!(site.host_names(), ["example.com"]);
    }

    #[test]
    fn required_fields_are_named() {
        for (mut i, field) in [
            (input("example.com"), "domain"),
            (input("example.com"), "user_id"),
            (input("example.com"), "ip"),
        ] {
            match field {
                "domain" => i.domain = None,
                "user_id" => i.user_id = None,
                _ => i.ip = Some(vec![]),
            }
            assert_eq!(Website::create(i).unwrap_err().field, field);
        }
    }

    #[test]
    fn an_update_changes_only_what_is_sent_and_replaces_lists() {
        let mut site = Website::create(WebsiteInput {
            subdomain: Some(vec!["www".into(), "shop".into()]),
            tag: Some(vec!["dc1".into()]),
            settings: Some(json!({"rulesets": {"wordpress": true}})),
            ..input("example.com")
        })
        .unwrap();
        site.apply(WebsiteInput {
            subdomain: Some(vec!["blog".into()]),
            settings: Some(json!({"rules": {"humans": "captcha"}})),
            ..WebsiteInput::default()
        })
        .unwrap();
        assert_eq!(site.host_names(), ["example.com", "blog.example.com"]);
        assert_eq!(site.tag, ["dc1"]);
        assert!(site.settings.rulesets.enabled("wordpress"));
        assert_eq!(
            site.settings.rules.0.action(Category::Humans),
            Action::Captcha
        );
    }

    #[test]
    fn a_refused_update_changes_nothing() {
        let mut site = Website::create(input("example.com")).unwrap();
        let before = site.clone();
        let err = site
            .apply(WebsiteInput {
                tag: Some(vec!["new".into()]),
                settings: Some(json!({"rules": {"humans": "allow"}})),
                ..WebsiteInput::default()
            })
            .unwrap_err();
        assert_eq!(err.field, "settings.rules.humans");
        assert_eq!(site, before);
    }

    #[test]
    fn domain_and_owner_cannot_change() {
        let mut site = Website::create(input("example.com")).unwrap();
        assert!(
            site.apply(WebsiteInput {
                domain: Some("EXAMPLE.com".into()),
                ..Default::default()
            })
            .is_ok()
        );
        assert_eq!(site.apply(input("other.com")).unwrap_err().field, "domain");
    }

    #[test]
    fn custom_issuer_needs_a_certificate_and_the_key_is_never_shown() {
        let mut site = Website::create(input("example.com")).unwrap();
        let err = site
            .apply(WebsiteInput {
                settings: Some(json!({"loadbalancer": {"certs_issuer": "custom"}})),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(err.field, "certificate");
        let generated = rcgen::generate_simple_self_signed(vec!["example.com".to_owned()]).unwrap();
        site.apply(WebsiteInput {
            certificate: Some(Certificate {
                public: generated.cert.pem(),
                private: generated.signing_key.serialize_pem(),
            }),
            settings: Some(json!({"loadbalancer": {"certs_issuer": "custom"}})),
            ..Default::default()
        })
        .unwrap();
        let shown = serde_json::to_string(&site.view()).unwrap();
        assert!(shown.contains("BEGIN CERTIFICATE"));
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");

        // A subdomain the stored certificate does not cover is refused, and nothing
        // changes.
        let before = site.clone();
        let err = site
            .apply(WebsiteInput {
                subdomain: Some(vec!["www".into()]),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(err.field, "certificate.public");
        assert!(
            err.message.contains("does not cover `www.example.com`"),
            "{err}"
        );
        assert_eq!(site, before);
        // Settings change freely meanwhile.
        site.apply(WebsiteInput {
            settings: Some(json!({"loadbalancer": {"force_https": true}})),
            ..Default::default()
        })
        .unwrap();
    }

    #[test]
    fn status_requests() {
        let mut site = Website::create(WebsiteInput {
            status: Some("paused".into()),
            ..input("example.com")
        })
        .unwrap();
        assert_eq!(site.status, Status::Paused);
        site.apply(WebsiteInput {
            status: Some("online".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(site.status, Status::Online);
        let err = site
            .apply(WebsiteInput {
                status: Some("error".into()),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(err.field, "status");
    }

    #[test]
    fn a_website_created_in_setup_waits_for_the_partner_and_its_work() {
        let mut site = Website::create(WebsiteInput {
            status: Some("setup".into()),
            ..input("example.com")
        })
        .unwrap();
        assert_eq!(site.status, Status::Setup);
        assert!(
            !site.awaits_work(),
            "no DNS or certificate work was asked for"
        );
        assert!(site.settle().is_empty(), "held");
        // The gateway's work begins (DNS check) and ends: still held.
        site.begin_setup(1, "checking DNS".into());
        let pending = site.pending.as_mut().unwrap();
        pending.callbacks.push("https://hooks.example/a".into());
        pending.issue_certificate = true;
        assert!(site.awaits_work());
        assert!(site.finish_setup(Ok(())).is_empty());
        assert!(
            !site.pending.as_ref().unwrap().issue_certificate,
            "an issuance that ended is not waited for again"
        );
        assert_eq!(site.status, Status::Setup);
        assert!(!site.awaits_work());
        assert!(site.settle().is_empty());
        // Asked to be online: the setup ends, and the waiting callback is due.
        site.apply(WebsiteInput {
            status: Some("online".into()),
            ..WebsiteInput::default()
        })
        .unwrap();
        assert_eq!(site.settle(), ["https://hooks.example/a"]);
        assert_eq!(
            (site.status, site.pending.is_none()),
            (Status::Online, true)
        );
        // `setup` is asked for only on create.
        let refused = site
            .apply(WebsiteInput {
                status: Some("setup".into()),
                ..WebsiteInput::default()
            })
            .unwrap_err();
        assert_eq!(refused.field, "status");
    }

    #[test]
    fn released_before_its_work_ends_a_held_website_goes_online_with_the_work() {
        let mut site = Website::create(WebsiteInput {
            status: Some("setup".into()),
            ..input("example.com")
        })
        .unwrap();
        site.begin_setup(1, "checking DNS".into());
        site.apply(WebsiteInput {
            status: Some("online".into()),
            ..WebsiteInput::default()
        })
        .unwrap();
        assert!(site.settle().is_empty(), "the work is not done");
        assert_eq!(site.status, Status::Setup);
        site.finish_setup(Ok(()));
        assert_eq!(site.status, Status::Online);
    }

    #[test]
    fn ipv6_addresses_come_apart_from_ip_and_show_in_ip() {
        let mut site = Website::create(WebsiteInput {
            ip: Some(vec!["192.0.2.10".into()]),
            ipv6: Some(vec!["2001:db8::10".into(), "2001:db8::11".into()]),
            ..input("example.com")
        })
        .unwrap();
        let shown = |site: &Website| site.view().ip;
        assert_eq!(shown(&site), ["192.0.2.10", "2001:db8::10", "2001:db8::11"]);
        // `ipv6` alone replaces the IPv6 addresses and keeps the IPv4 ones.
        site.apply(WebsiteInput {
            ipv6: Some(vec!["2001:db8::12".into()]),
            ..WebsiteInput::default()
        })
        .unwrap();
        assert_eq!(shown(&site), ["192.0.2.10", "2001:db8::12"]);
        // `ip` alone replaces the list; an empty `ipv6` drops the IPv6 addresses.
        site.apply(WebsiteInput {
            ip: Some(vec!["192.0.2.20".into(), "2001:db8::20".into()]),
            ..WebsiteInput::default()
        })
        .unwrap();
        assert_eq!(shown(&site), ["192.0.2.20", "2001:db8::20"]);
        site.apply(WebsiteInput {
            ipv6: Some(vec![]),
            ..WebsiteInput::default()
        })
        .unwrap();
        assert_eq!(shown(&site), ["192.0.2.20"]);
        // An IPv6 list of IPv4 addresses, or no address at all, is refused.
        let refused = site
            .apply(WebsiteInput {
                ipv6: Some(vec!["192.0.2.30".into()]),
                ..WebsiteInput::default()
            })
            .unwrap_err();
        assert_eq!(refused.field, "ipv6");
        let only_v6 = Website::create(WebsiteInput {
            ip: None,
            ipv6: Some(vec!["2001:db8::1".into()]),
            ..input("example.org")
        })
        .unwrap();
        assert_eq!(shown(&only_v6), ["2001:db8::1"]);
        let none = Website::create(WebsiteInput {
            ip: None,
            ipv6: Some(vec![]),
            ..input("example.net")
        })
        .unwrap_err();
        assert_eq!(none.field, "ip");
    }
}
