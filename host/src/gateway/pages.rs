//! The small HTML pages the gateway answers itself (404, 403, 429, 502, 504) and the
//! response body type every handler returns.

use http::{HeaderValue, Response, StatusCode, header};

pub use botgate_http1::{Body, BoxError, empty, full};

pub use botgate_model::html::escape;

/// The shared frame of every page: a title, a heading and `body_html` (already
/// escaped by the caller).
pub fn document(title: &str, body_html: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title}</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;\
         padding:0 1rem;color:#222}}h1{{font-size:1.4rem}}small{{color:#777}}</style></head>\
         <body><h1>{title}</h1>{body_html}<p><small>botgate</small></p></body></html>\n",
        title = escape(title),
    )
}

/// An HTML response that is never cached.
pub fn html(status: StatusCode, page: String) -> Response<Body> {
    let mut response = Response::new(full(page));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A page with a title and one paragraph of `message` (escaped here).
pub fn page(status: StatusCode, title: &str, message: &str) -> Response<Body> {
    html(
        status,
        document(title, &format!("<p>{}</p>", escape(message))),
    )
}

/// No website is configured for `host`.
pub fn unknown_host(host: &str) -> Response<Body> {
    page(
        StatusCode::NOT_FOUND,
        "Website not found",
        &format!("No website named {host} is served here. Check the address."),
    )
}

/// The request had no usable host name.
pub fn missing_host() -> Response<Body> {
    page(
        StatusCode::BAD_REQUEST,
        "Bad request",
        "The request names no website (its Host header is missing, malformed or repeated).",
    )
}

/// The website's policy denies this request.
pub fn denied() -> Response<Body> {
    page(
        StatusCode::FORBIDDEN,
        "Access denied",
        "This website's protection refused the request. If you think this is a mistake, \
         contact the website's owner.",
    )
}

/// The client or the website went over its rate limit.
pub fn too_many_requests(retry_after_seconds: u64) -> Response<Body> {
    with_retry_after(
        page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests",
            "Too many requests arrived in a short time. Wait a moment, then try again.",
        ),
        retry_after_seconds,
    )
}

fn with_retry_after(mut response: Response<Body>, seconds: u64) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// No origin of the website could be reached.
pub fn bad_gateway() -> Response<Body> {
    page(
        StatusCode::BAD_GATEWAY,
        "Website unreachable",
        "The website's servers could not be reached. Try again in a few minutes.",
    )
}

/// The request's path has no single reading ([`botgate_normalise::refusal`]).
pub fn path_refused(refusal: botgate_normalise::PathRefusal) -> Response<Body> {
    use botgate_normalise::PathRefusal;
    page(
        StatusCode::BAD_REQUEST,
        "Bad request",
        match refusal {
            PathRefusal::AboveRoot => "The address climbs above the website's root folder.",
            PathRefusal::DotSegmentWithBackslash => {
                "The address mixes `.` or `..` with a backslash, which servers read differently."
            }
            PathRefusal::DotSegmentWithParameters => {
                "The address gives `.` or `..` parameters (`..;`), which servers read differently."
            }
            PathRefusal::EncodedSemicolon => {
                "The address holds an encoded `;` (`%3B`), which servers read differently."
            }
        },
    )
}

/// The request came back to the gateway that forwarded it (508, RFC 5842): a
/// website's origin leads to the gateway itself.
/// 414: a request target longer than the rule components read, on a protected website.
pub fn target_too_long(most: usize) -> Response<Body> {
    page(
        StatusCode::URI_TOO_LONG,
        "Address too long",
        &format!(
            "The address is longer than this website's protection reads ({} KiB).",
            most / 1024
        ),
    )
}

/// 431: more header lines or bytes than a protected website's components read.
pub fn headers_too_large() -> Response<Body> {
    page(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "Headers too large",
        "The request carries more headers than this website's protection reads.",
    )
}

pub fn loop_detected() -> Response<Body> {
    page(
        StatusCode::LOOP_DETECTED,
        "Loop detected",
        "This website's server address leads back to this gateway. The website's owner or \
         hosting provider must set the address of the real server.",
    )
}

/// Every origin of the website is an address the gateway's origin policy refuses.
pub fn origin_refused() -> Response<Body> {
    page(
        StatusCode::BAD_GATEWAY,
        "Website origin refused",
        "This website's server address is not one this gateway connects to. The website's \
         owner or hosting provider must set a valid origin address.",
    )
}

/// The website is over its rate, and so is the share kept for visitors with a pass.
pub fn website_busy(retry_after_seconds: u64) -> Response<Body> {
    with_retry_after(
        page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Website busy",
            "This website is receiving more visits than it can take. Try again in a moment.",
        ),
        retry_after_seconds,
    )
}

/// The origin did not answer in time.
pub fn gateway_timeout() -> Response<Body> {
    page(
        StatusCode::GATEWAY_TIMEOUT,
        "Website too slow",
        "The website's servers did not answer in time. Try again in a few minutes.",
    )
}

/// 421: the website does not answer over this connection (HTTP/3 when it has not
/// turned `enable_http3` on); the client retries over a new one.
pub fn misdirected() -> Response<Body> {
    page(
        StatusCode::MISDIRECTED_REQUEST,
        "Misdirected request",
        "This website does not answer over HTTP/3. Please try again.",
    )
}

/// A `TRACE` or `CONNECT` request, which the gateway does not pass on, as nginx and the
/// hosted proxies refuse them too: an origin that echoes a `TRACE` would hand a page's
/// script the request's cookies and credentials (cross-site tracing), and one that
/// accepts a `CONNECT` would turn its connection into a tunnel other visitors'
/// requests could follow into.
pub fn method_refused(method: &http::Method) -> Response<Body> {
    let mut response = page(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method not allowed",
        &format!("{method} requests are not served."),
    );
    response.headers_mut().insert(
        http::header::ALLOW,
        HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
    );
    response
}

/// A redirect (301) to `location`.
pub fn moved_permanently(location: &str) -> Response<Body> {
    let mut response = Response::new(empty());
    *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_escape_what_they_show() {
        let response = unknown_host("<script>x</script>");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let page = document("t", &escape("<b>"));
        assert!(page.contains("&lt;b&gt;"));
        assert!(!page.contains("<b>"));
    }
}
