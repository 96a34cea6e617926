//! A request as a website's custom rules read it: the client's address, its country and
//! ASN (looked up once, when a rule asks), and the request's texts in the reading the
//! rule components have (the path and query normalised).

use super::connection::ConnectionInfo;
use super::geoip::{Geo, GeoIp};
use botgate_model::custom_rules::{Subject, TextSource, lower};
use http::{HeaderMap, header};
use std::cell::{OnceCell, RefCell};
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

/// The decider the access log and metrics name for a custom rule (no version).
pub static CUSTOM_DECIDER: LazyLock<(Arc<str>, Arc<str>)> =
    LazyLock::new(|| (Arc::from("custom"), Arc::from("-")));

/// One request, read by the rules.
pub struct RuleSubject<'a> {
    pub method: &'a str,
    /// The host the request names, canonical.
    pub host: &'a str,
    /// The path as received (or as a servlet container reads it), and the query.
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub connection: &'a ConnectionInfo,
    pub geoip: &'a GeoIp,
    geo: OnceCell<Geo>,
    /// Each source's texts lower-cased, as conditions first read them.
    lowered: RefCell<Vec<(TextSource, Vec<Box<str>>)>>,
}

impl<'a> RuleSubject<'a> {
    pub fn new<B>(
        request: &'a http::Request<B>,
        host: &'a str,
        connection: &'a ConnectionInfo,
        geoip: &'a GeoIp,
    ) -> Self {
        RuleSubject {
            method: request.method().as_str(),
            host,
            path: request.uri().path(),
            query: request.uri().query().unwrap_or(""),
            headers: request.headers(),
            connection,
            geoip,
            geo: OnceCell::new(),
            lowered: RefCell::default(),
        }
    }

    /// The same request with its path read as `path` (the servlet containers' reading).
    pub fn reading_path(&self, path: &'a str) -> RuleSubject<'a> {
        RuleSubject {
            path,
            geo: self.geo.clone(),
            lowered: RefCell::default(),
            ..*self
        }
    }

    fn geo(&self) -> Geo {
        *self
            .geo
            .get_or_init(|| self.geoip.lookup(self.connection.client.ip()))
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

    fn any_text(&self, source: &TextSource, visit: &mut dyn FnMut(&str) -> bool) -> bool {
        let header = match source {
            TextSource::Path => return visit(&botgate_normalise::path(self.path)),
            TextSource::Query => return visit(&botgate_normalise::query(self.query)),
            TextSource::Method => return visit(self.method),
            TextSource::Ja4 => {
                let ja4 = self
                    .connection
                    .tls
                    .as_ref()
                    .map_or("", |tls| tls.ja4.as_str());
                return visit(ja4);
            }
            // The host the request names, from `Host` or HTTP/2's `:authority`.
            TextSource::Header(name) if **name == *"host" => return visit(self.host),
            TextSource::UserAgent => header::USER_AGENT.as_str(),
            TextSource::Referrer => header::REFERER.as_str(),
            TextSource::Header(name) => &**name,
        };
        let mut values = self.headers.get_all(header).iter().peekable();
        if values.peek().is_none() {
            return visit("");
        }
        values.any(|value| visit(&String::from_utf8_lossy(value.as_bytes())))
    }

    fn any_lower_text(&self, source: &TextSource, visit: &mut dyn FnMut(&str) -> bool) -> bool {
        let mut lowered = self.lowered.borrow_mut();
        let at = match lowered.iter().position(|(read, _)| read == source) {
            Some(at) => at,
            None => {
                let mut texts = Vec::new();
                self.any_text(source, &mut |value| {
                    texts.push(lower(value).into());
                    false
                });
                lowered.push((source.clone(), texts));
                lowered.len() - 1
            }
        };
        lowered[at].1.iter().any(|text| visit(text))
    }
}
