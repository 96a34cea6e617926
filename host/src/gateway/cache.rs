//! The response cache behind `cache_static_files` and `cache_dynamic_pages`: HTTP
//! caching semantics of a shared cache (RFC 9111, by `http-cache-semantics`) over a
//! store bounded in bytes.
//!
//! What is cached, and what is not:
//! - Only `GET` responses are stored; `GET` and `HEAD` are answered from them.
//! - A request is a *static file* when its path ends in one of [`STATIC_EXTENSIONS`];
//!   those follow `cache_static_files`, every other request follows
//!   `cache_dynamic_pages`.
//! - A dynamic page is neither looked up nor stored for a request that carries a
//!   `Cookie` (other than the gateway's own pass) or `Authorization` header: such pages
//!   are usually personal. A static file for such a request is stored only when the
//!   origin says `public` or `s-maxage`, and never when it is HTML (a page behind a
//!   static-looking path, `/account;.css`, is the web-cache-deception attack).
//! - A response that sets a cookie is never stored, whatever its `Cache-Control`, and
//!   only explicit freshness counts (no heuristic from `Last-Modified`).
//! - Freshness, `no-store`, `private`, `s-maxage`, `Vary` and `Age` follow the RFC
//!   through [`CachePolicy`]. A stale entry is fetched again in full (no conditional
//!   revalidation); a request whose `Vary` headers differ is a miss, and its response
//!   replaces the stored one.
//! - Bodies are streamed to the client while they are copied; a body larger than the
//!   object limit is passed through and not stored.

use super::pages::{self, Body, BoxError};
use botgate_http1::wire::header_tokens;
use botgate_store::Owner;
use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Method, Response, StatusCode, header, request};
use http_body_util::BodyExt;
use http_cache_semantics::{BeforeRequest, CacheOptions, CachePolicy};
use hyper::body::{Body as _, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

/// Path extensions that make a request a static file.
pub const STATIC_EXTENSIONS: &[&str] = &[
    "avif", "bmp", "css", "eot", "gif", "ico", "jpeg", "jpg", "js", "json", "map", "mjs", "mp3",
    "mp4", "ogg", "otf", "pdf", "png", "svg", "svgz", "ttf", "txt", "wasm", "webm", "webp", "woff",
    "woff2", "xml", "zip",
];

/// The response header that says whether an answer came from the cache.
pub const CACHE_HEADER: &str = "x-botgate-cache";

/// How much the cache may hold.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// The most bytes of bodies and headers held in all.
    pub memory_bytes: u64,
    /// The largest single response stored (clamped to a quarter of `memory_bytes`).
    pub max_object_bytes: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            memory_bytes: 256 * 1024 * 1024,
            max_object_bytes: 8 * 1024 * 1024,
        }
    }
}

/// The shards of the store; each holds a quarter of the bytes.
const SHARDS: usize = 4;

/// Whether a request may use the cache, and under which switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cacheable {
    StaticFile,
    DynamicPage,
}

/// Decides whether a request may use the cache under a website's switches.
pub fn cacheable(
    parts: &request::Parts,
    cache_static_files: bool,
    cache_dynamic_pages: bool,
) -> Option<Cacheable> {
    if !(cache_static_files || cache_dynamic_pages) {
        return None;
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return None;
    }
    if is_static_path(parts.uri.path()) {
        return cache_static_files.then_some(Cacheable::StaticFile);
    }
    (cache_dynamic_pages && !personal(parts)).then_some(Cacheable::DynamicPage)
}

/// Whether a request carries credentials or cookies (the website's: the gateway took
/// its own pass cookies out before, [`super::challenge::take_pass_cookies`]).
fn personal(parts: &request::Parts) -> bool {
    parts.headers.contains_key(header::AUTHORIZATION) || parts.headers.contains_key(header::COOKIE)
}

/// The bytes of a head's header fields.
fn header_bytes(headers: &http::HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// Whether `path` names a static file, as every server reads it: `/account;.css` is a
/// servlet container's `/account`, and `/account%2F.css` a decoding server's
/// `/account/.css`, both pages.
fn is_static_path(path: &str) -> bool {
    has_static_extension(path)
        && botgate_normalise::without_parameters(path).is_none_or(|p| has_static_extension(&p))
        && (!path.contains('%') || has_static_extension(&botgate_normalise::path(path)))
}

fn has_static_extension(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or("");
    match file.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => STATIC_EXTENSIONS
            .iter()
            .any(|known| known.eq_ignore_ascii_case(extension)),
        _ => false,
    }
}

/// One stored response.
pub struct Entry {
    policy: CachePolicy,
    body: Bytes,
    /// The response's fields of a name sent more than once, in order: the policy's
    /// head keeps only the last of each.
    repeated: Repeated,
    /// The stored request and response heads, in bytes (the policy keeps both).
    head_bytes: usize,
}

#[derive(Clone)]
struct EntryWeighter;

impl quick_cache::Weighter<Key, Arc<Entry>> for EntryWeighter {
    fn weight(&self, key: &Key, entry: &Arc<Entry>) -> u64 {
        // Body, key, the stored heads and the bookkeeping around them.
        (entry.body.len() + key.0.len() + entry.head_bytes + 512) as u64
    }
}

/// What a cache entry is stored under: the website's owner (partner and user), then
/// scheme, host and path with query. A domain deleted and created again for another
/// owner never meets its last owner's answers (nor the addresses they were filled in
/// under: neither name holds a line break).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key(Box<str>);

impl Key {
    pub fn new(https: bool, host: &str, owner: Owner<'_>, parts: &request::Parts) -> Key {
        let scheme = if https { "https" } else { "http" };
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let (partner, user) = (owner.partner.as_str(), owner.user.as_str());
        Key(format!("{partner}\n{user}\n{scheme}://{host}{target}").into_boxed_str())
    }
}

/// The shared response cache.
pub struct ResponseCache {
    entries: quick_cache::sync::Cache<Key, Arc<Entry>, EntryWeighter>,
    max_object_bytes: u64,
}

fn options() -> CacheOptions {
    CacheOptions {
        shared: true,
        cache_heuristic: 0.0,
        ..CacheOptions::default()
    }
}

impl ResponseCache {
    pub fn new(config: &CacheConfig) -> ResponseCache {
        let memory = config.memory_bytes.max(SHARDS as u64 * 4096);
        let options = quick_cache::OptionsBuilder::new()
            .shards(SHARDS)
            .estimated_items_capacity(((memory / 16_384) as usize).max(16))
            .weight_capacity(memory)
            .build()
            .expect("the cache options are complete");
        let entries = quick_cache::sync::Cache::with_options(
            options,
            EntryWeighter,
            Default::default(),
            Default::default(),
        );
        let max_object_bytes = config.max_object_bytes.min(entries.shard_capacity() / 2);
        ResponseCache {
            entries,
            max_object_bytes,
        }
    }

    /// Bytes held now.
    pub fn weight(&self) -> u64 {
        self.entries.weight()
    }

    /// A fresh stored answer to the request, if there is one.
    pub fn lookup(&self, key: &Key, parts: &request::Parts) -> Option<Response<Body>> {
        let entry = self.entries.get(key)?;
        let now = SystemTime::now();
        let fresh = if parts.method == Method::HEAD {
            // A HEAD is answered from the stored GET.
            let mut as_get = request_head(parts);
            as_get.method = Method::GET;
            entry.policy.before_request(&as_get, now)
        } else {
            entry.policy.before_request(parts, now)
        };
        let BeforeRequest::Fresh(head) = fresh else {
            return None;
        };
        let body = if parts.method == Method::HEAD {
            pages::empty()
        } else {
            pages::full(entry.body.clone())
        };
        let mut response = Response::from_parts(head, body);
        let headers = response.headers_mut();
        for (name, values) in &entry.repeated {
            // Only a name the policy kept (not a hop-by-hop one) and did not set itself.
            if name == header::AGE || name == header::WARNING {
                continue;
            }
            if headers.remove(name).is_some() {
                for value in values {
                    headers.append(name, value.clone());
                }
            }
        }
        headers.insert(CACHE_HEADER, HeaderValue::from_static("hit"));
        Some(response)
    }

    /// Passes the origin's `response` to the `GET` request `parts` on, copying it into
    /// the cache as it streams when it may be stored.
    pub fn store(
        self: &Arc<Self>,
        key: Key,
        kind: Cacheable,
        parts: &request::Parts,
        response: Response<Body>,
    ) -> Response<Body> {
        if parts.method != Method::GET
            || response.status() == StatusCode::PARTIAL_CONTENT
            || response.headers().contains_key(header::SET_COOKIE)
        {
            return response;
        }
        if kind == Cacheable::StaticFile && !shareable_static(parts, &response) {
            return response;
        }
        let now = SystemTime::now();
        let head_bytes = header_bytes(&parts.headers) + header_bytes(response.headers());
        let policy = CachePolicy::new_options(parts, &response, now, options());
        if !policy.is_storable() || policy.time_to_live(now).is_zero() {
            return response;
        }
        let declared = response.body().size_hint().upper();
        if declared.is_some_and(|len| len > self.max_object_bytes) {
            return response;
        }
        let repeated = repeated_fields(response.headers());
        let (head, body) = response.into_parts();
        let copying = CopyingBody {
            inner: body,
            copy: Some(BytesMut::new()),
            sink: Some((self.clone(), key, policy, repeated, head_bytes)),
            limit: self.max_object_bytes as usize,
        };
        Response::from_parts(head, copying.boxed_unsync())
    }

    fn insert(
        &self,
        key: Key,
        policy: CachePolicy,
        repeated: Repeated,
        body: Bytes,
        head_bytes: usize,
    ) {
        let entry = Entry {
            policy,
            body,
            repeated,
            head_bytes,
        };
        self.entries.insert(key, Arc::new(entry));
    }
}

/// A response's fields of the names it sends more than once.
type Repeated = Vec<(http::HeaderName, Vec<HeaderValue>)>;

fn repeated_fields(headers: &http::HeaderMap) -> Repeated {
    headers
        .keys()
        .filter_map(|name| {
            let values: Vec<HeaderValue> = headers.get_all(name).iter().cloned().collect();
            (values.len() > 1).then(|| (name.clone(), values))
        })
        .collect()
}

/// A body that hands its frames on and keeps a copy, stored when the body ends whole.
struct CopyingBody {
    inner: Body,
    copy: Option<BytesMut>,
    sink: Option<(Arc<ResponseCache>, Key, CachePolicy, Repeated, usize)>,
    limit: usize,
}

impl CopyingBody {
    /// Stores the copy once the body has ended whole.
    fn finish(&mut self) {
        if let (Some(copy), Some((cache, key, policy, repeated, head_bytes))) =
            (self.copy.take(), self.sink.take())
        {
            cache.insert(key, policy, repeated, copy.freeze(), head_bytes);
        }
    }
}

impl hyper::body::Body for CopyingBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let over = this
                        .copy
                        .as_ref()
                        .is_some_and(|copy| copy.len() + data.len() > this.limit);
                    if over {
                        this.copy = None;
                    } else if let Some(copy) = this.copy.as_mut() {
                        copy.extend_from_slice(data);
                    }
                }
            }
            Poll::Ready(Some(Err(_))) => this.copy = None,
            Poll::Ready(None) => this.finish(),
            Poll::Pending => {}
        }
        // The server (hyper, or the HTTP/1.1 loop) stops polling once a body says it
        // has ended.
        if this.inner.is_end_stream() {
            this.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a static file's answer may be shared: never an HTML page, and for a
/// request with cookies or credentials only what the origin says is `public`.
fn shareable_static(parts: &request::Parts, response: &Response<Body>) -> bool {
    let headers = response.headers();
    let html = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/html"));
    if html {
        return false;
    }
    if !personal(parts) {
        return true;
    }
    header_tokens(headers, header::CACHE_CONTROL).any(|directive| {
        directive.eq_ignore_ascii_case(b"public")
            || directive
                .get(..8)
                .is_some_and(|start| start.eq_ignore_ascii_case(b"s-maxage"))
    })
}

/// Headers a stored request keeps for `Vary` matching.
pub fn request_head(parts: &request::Parts) -> request::Parts {
    let mut head = request::Request::new(());
    *head.method_mut() = parts.method.clone();
    *head.uri_mut() = parts.uri.clone();
    *head.headers_mut() = parts.headers.clone();
    head.into_parts().0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::challenge::take_pass_cookies;
    use http::Request;

    fn parts(method: Method, target: &str, headers: &[(&str, &str)]) -> request::Parts {
        let mut request = Request::builder().method(method).uri(target);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn static_files_and_dynamic_pages_follow_their_switches() {
        let css = parts(Method::GET, "/theme/site.CSS?v=3", &[("cookie", "a=b")]);
        assert_eq!(cacheable(&css, true, false), Some(Cacheable::StaticFile));
        assert_eq!(cacheable(&css, false, true), None);
        let page = parts(Method::GET, "/blog/post", &[]);
        assert_eq!(cacheable(&page, true, false), None);
        assert_eq!(cacheable(&page, false, true), Some(Cacheable::DynamicPage));
        let personal = parts(Method::GET, "/blog/post", &[("cookie", "session=1")]);
        assert_eq!(cacheable(&personal, true, true), None);
        let post = parts(Method::POST, "/site.css", &[]);
        assert_eq!(cacheable(&post, true, true), None);
        let hidden = parts(Method::GET, "/.css", &[]);
        assert_eq!(cacheable(&hidden, true, false), None);
        // A page behind a static-looking parameter is a page to a servlet container.
        let deception = parts(Method::GET, "/account;.css", &[]);
        assert_eq!(cacheable(&deception, true, false), None);
        assert_eq!(
            cacheable(&deception, true, true),
            Some(Cacheable::DynamicPage)
        );
        let decoded = parts(Method::GET, "/account%2F.css", &[]);
        assert_eq!(cacheable(&decoded, true, false), None);
        let encoded = parts(Method::GET, "/theme/site%2Dmain.css", &[]);
        assert_eq!(
            cacheable(&encoded, true, false),
            Some(Cacheable::StaticFile)
        );
        let versioned = parts(Method::GET, "/site.css;v=3", &[]);
        assert_eq!(cacheable(&versioned, true, false), None);
        let session = parts(Method::GET, "/logo.png;jsessionid=1", &[]);
        assert_eq!(cacheable(&session, true, false), None);
        let static_parameter = parts(Method::GET, "/assets;v=3/site.css", &[]);
        assert_eq!(
            cacheable(&static_parameter, true, false),
            Some(Cacheable::StaticFile)
        );
        // The gateway's own pass (taken out before) is no sign of a personal page.
        for pass in ["botgate_pass=1.x", "botgate_pass_plain=w1.x"] {
            let mut passed = parts(Method::GET, "/blog/post", &[("cookie", pass)]);
            take_pass_cookies(&mut passed.headers);
            assert_eq!(
                cacheable(&passed, false, true),
                Some(Cacheable::DynamicPage)
            );
        }
        let mut both = parts(Method::GET, "/", &[("cookie", "botgate_pass=1.x; sid=2")]);
        take_pass_cookies(&mut both.headers);
        assert_eq!(cacheable(&both, false, true), None);
    }
}
