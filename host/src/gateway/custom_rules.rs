//! A request as a website's custom rules read it: the client's address, its country and
//! ASN (looked up once, when a rule asks), and the request's texts in the reading the
//! rule components have (the path and query normalised).

use super::connection::ConnectionInfo;
use super::geoip::{Geo, GeoIp};
use botgate_model::custom_rules::{Subject, TextSource};
use http::{HeaderMap, header};
use std::borrow::Cow;
use std::cell::OnceCell;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

/// The decider the access log and metrics name for a custom rule (no version).
pub static CUSTOM_DECIDER: LazyLock<(Arc<str>, Arc<str>)> =
    LazyLock::new(|| (Arc::from("custom"), Arc::from("-")));

/// One request, read by the rules.
pub struct RuleSubject<'a> {
    pub method: &'a str,
    /// The path and query as received.
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub connection: &'a ConnectionInfo,
    pub geoip: &'a GeoIp,
    geo: OnceCell<Geo>,
}

impl<'a> RuleSubject<'a> {
    pub fn new<B>(
        request: &'a http::Request<B>,
        connection: &'a ConnectionInfo,
        geoip: &'a GeoIp,
    ) -> Self {
        RuleSubject {
            method: request.method().as_str(),
            path: request.uri().path(),
            query: request.uri().query().unwrap_or(""),
            headers: request.headers(),
            connection,
            geoip,
            geo: OnceCell::new(),
        }
    }

    fn geo(&self) -> Geo {
        *self
            .geo
            .get_or_init(|| self.geoip.lookup(self.connection.client.ip()))
    }

    /// The header's values, joined by `, ` when it is sent more than once (`; ` for
    /// cookies); empty when absent.
    fn header(&self, name: &str) -> Cow<'_, str> {
        let mut values = self.headers.get_all(name).iter();
        let Some(first) = values.next() else {
            return Cow::Borrowed("");
        };
        let Some(second) = values.next() else {
            return String::from_utf8_lossy(first.as_bytes());
        };
        let separator = if name == header::COOKIE.as_str() {
            "; "
        } else {
            ", "
        };
        let mut joined = String::from_utf8_lossy(first.as_bytes()).into_owned();
        for value in std::iter::once(second).chain(values) {
            joined.push_str(separator);
            joined.push_str(&String::from_utf8_lossy(value.as_bytes()));
        }
        Cow::Owned(joined)
    }
}

impl Subject for RuleSubject<'_> {
    fn client_ip(&self) -> IpAddr {
        self.connection.client.ip()
    }

    fn country(&self) -> Option<[u8; 2]> {
        self.geo().country
    }

    fn asn(&self) -> Option<u32> {
        self.geo().asn
    }

    fn text(&self, source: &TextSource) -> Cow<'_, str> {
        match source {
            TextSource::Path => botgate_normalise::path(self.path),
            TextSource::Query => botgate_normalise::query(self.query),
            TextSource::Method => Cow::Borrowed(self.method),
            TextSource::UserAgent => self.header(header::USER_AGENT.as_str()),
            TextSource::Referrer => self.header(header::REFERER.as_str()),
            TextSource::Ja4 => Cow::Borrowed(
                self.connection
                    .tls
                    .as_ref()
                    .map_or("", |tls| tls.ja4.as_str()),
            ),
            TextSource::Header(name) => self.header(name),
        }
    }
}
