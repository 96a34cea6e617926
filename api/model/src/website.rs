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
}

/// The fields of a create or an update as the partner sent them, already split into
/// lists (from JSON arrays or comma-separated form values) but not yet checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WebsiteInput {
    pub domain: Option<String>,
    pub subdomain: Option<Vec<String>>,
    pub user_id: Option<String>,
    pub ip: Option<Vec<String>>,
    pub tag: Option<Vec<String>>,
    pub status: Option<String>,
    pub certificate: Option<Certificate>,
    pub settings: Option<serde_json::Value>,
}

/// The status a partner may ask for; `setup` and `error` are the gateway's to set.
fn requested_status(input: &Option<String>) -> Result<Option<Status>, Invalid> {
    match input.as_deref().map(str::trim) {
        None => Ok(None),
        Some("online") => Ok(Some(Status::Online)),
        Some("paused") => Ok(Some(Status::Paused)),
        Some(other) => Err(Invalid::unacceptable(
            "status",
            format!(
                "a website can be asked to be `online` or `paused`, not `{}`",
                names::shorten(other)
            ),
        )),
    }
}

impl Website {
    /// Checks a create and builds the website: `domain`, `user_id` and at least one
    /// `ip` are required; every other field takes its default. A website asked to be
    /// `paused` is paused; otherwise it is online as soon as nothing is pending.
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
        let ip = names::origin_ips(input.ip.clone().unwrap_or_default())?;
        if ip.is_empty() {
            return Err(Invalid::malformed(
                "ip",
                "at least one origin address (IPv4 or IPv6) is required",
            ));
        }
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
            ..input
        })?;
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
        if let Some(ip) = input.ip {
            next.ip = names::origin_ips(ip)?;
            if next.ip.is_empty() {
                return Err(Invalid::malformed(
                    "ip",
                    "at least one origin address (IPv4 or IPv6) is required",
                ));
            }
        }
        if let Some(tag) = input.tag {
            next.tag = names::tags("tag", tag)?;
        }
        if let Some(settings) = &input.settings {
            SettingsPatch::parse(settings)?.apply(&mut next.settings);
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
        match requested_status(&input.status)? {
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
    /// `now_ms`; callbacks already waiting keep waiting.
    pub fn begin_setup(&mut self, now_ms: u64, reason: String) {
        let (callbacks, issue_certificate) = self
            .pending
            .take()
            .map(|pending| (pending.callbacks, pending.issue_certificate))
            .unwrap_or_default();
        self.status = Status::Setup;
        self.status_reason = Some(reason);
        self.pending = Some(Pending {
            since_ms: now_ms,
            callbacks,
            issue_certificate,
        });
    }

    /// Ends asynchronous work: `online`, or `error` with the reason; the callbacks
    /// that waited for it.
    pub fn finish_setup(&mut self, outcome: Result<(), String>) -> Vec<String> {
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

    /// Whether the website needs a certificate now: it has none that covers its names
    /// and is readable, or (for renewal) a third or less of its lifetime remains.
    pub fn certificate_due(&self, now_s: i64) -> bool {
        let Some(certificate) = &self.certificate else {
            return true;
        };
        let Some((not_before, not_after, names)) = certificate::leaf_summary(&certificate.public)
        else {
            return true;
        };
        let covered = self.host_names().iter().all(|host| {
            names
                .iter()
                .any(|name| certificate::name_covers(name, host))
        });
        let renew_from = not_after - (not_after - not_before) / 3;
        !covered || now_s >= renew_from
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
            certificate: self.certificate.as_ref().map(|c| CertificateView {
                public: c.public.clone(),
            }),
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

/// A certificate as shown: the public bundle only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = CertificatePublic))]
pub struct CertificateView {
    pub public: String,
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
}
