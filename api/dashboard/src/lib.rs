//! The website owners' dashboard: `/{lang}/website/{domain}/{edit|statistics|events}`,
//! opened by a partner's panel in a frame with `?api-key=<the user's key>`.
//!
//! The server sends one page shell per language (its strings from the language's
//! catalogue, [`catalogue`]) and the static assets, all compiled into the binary. The
//! page's script trades the key for a session token (`POST /v1.0/session`), removes the
//! key from the address and then speaks the `/v1.0` API with the token, so the
//! dashboard changes only what the user's key may change, through the API's checks.
//!
//! Every page says `Referrer-Policy: no-referrer` and `Cache-Control: no-store`, and
//! its `Content-Security-Policy` allows only the page's own scripts, styles and API
//! (no inline script) and only the owning partner's panel origins as frame ancestors
//! (none when the website is unknown). The header thus shows anyone which panel origins
//! the partner of a domain listed, as any page of that panel would.

pub mod catalogue;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use botgate_model::Domain;
use botgate_model::dashboard::frame_ancestors;
use botgate_model::html::escape;
use botgate_store::{AccountStore, AnyStore, WebsiteStore};
use catalogue::Language;
use std::sync::Arc;

/// The dashboard's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// The rules editor.
    Edit,
    Statistics,
    Events,
}

impl Page {
    pub const ALL: [Page; 3] = [Page::Edit, Page::Statistics, Page::Events];

    pub fn parse(name: &str) -> Option<Page> {
        Page::ALL.into_iter().find(|page| page.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Page::Edit => "edit",
            Page::Statistics => "statistics",
            Page::Events => "events",
        }
    }
}

/// A file compiled into the binary, with its validator.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: [Asset; 4] = [
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../web/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../web/style.css"),
    },
    Asset {
        name: "uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../web/vendor/uplot/uPlot.iife.min.js"),
    },
    Asset {
        name: "uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../web/vendor/uplot/uPlot.min.css"),
    },
];

/// Where the assets are served.
pub const ASSET_PATH: &str = "/dashboard/assets";

/// What the dashboard's handlers share.
struct Dashboard {
    store: Arc<AnyStore>,
    /// Each asset's `ETag`, in [`ASSETS`] order.
    etags: Vec<HeaderValue>,
}

/// The dashboard's routes, to merge beside the API's.
pub fn router(store: Arc<AnyStore>) -> Router {
    use sha2::Digest;
    let etags = ASSETS
        .iter()
        .map(|asset| {
            let digest = sha2::Sha256::digest(asset.body);
            let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\"")).unwrap_or(HeaderValue::from_static("\"\""))
        })
        .collect();
    Router::new()
        .route("/{lang}/website/{domain}/{page}", get(page))
        .route(&format!("{ASSET_PATH}/{{file}}"), get(asset))
        .with_state(Arc::new(Dashboard { store, etags }))
}

/// The headers every dashboard response carries.
fn common_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

async fn asset(
    State(dashboard): State<Arc<Dashboard>>,
    Path(file): Path<String>,
    request_headers: HeaderMap,
) -> Response {
    let Some(index) = ASSETS.iter().position(|asset| asset.name == file) else {
        let mut response = (StatusCode::NOT_FOUND, "no such file").into_response();
        common_headers(response.headers_mut());
        return response;
    };
    let (asset, etag) = (&ASSETS[index], &dashboard.etags[index]);
    let fresh = request_headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|sent| sent == etag);
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
    };
    let headers = response.headers_mut();
    common_headers(headers);
    headers.insert(header::ETAG, etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The CSP of a page framed by `ancestors`.
fn content_security_policy(ancestors: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
         frame-ancestors {ancestors}"
    )
}

/// The panel origins of the partner owning `domain`, as a `frame-ancestors` list:
/// `'none'` when the website or its partner is unknown, or the store does not answer.
async fn ancestors_of(store: &AnyStore, domain: Option<&Domain>) -> String {
    let Some(domain) = domain else {
        return frame_ancestors(&[]);
    };
    // The owner alone: the rest of the record (up to hundreds of KiB) is not read.
    let partner = match store.website_owner(domain).await {
        Ok(Some(owner)) => store.partner(&owner.partner).await,
        Ok(None) => Ok(None),
        Err(error) => Err(error),
    };
    match partner {
        Ok(Some(partner)) => frame_ancestors(&partner.frame_origins),
        Ok(None) => frame_ancestors(&[]),
        Err(error) => {
            tracing::warn!(%domain, %error, "the dashboard could not read the website's panel origins");
            frame_ancestors(&[])
        }
    }
}

async fn page(
    State(dashboard): State<Arc<Dashboard>>,
    Path((lang, domain, page)): Path<(String, String, String)>,
) -> Response {
    let language = Language::from_tag(&lang);
    let domain = Domain::parse(&domain).ok();
    let page = Page::parse(&page);
    let ancestors = ancestors_of(&dashboard.store, domain.as_ref()).await;
    let (status, html) = match (&domain, page) {
        (Some(domain), Some(page)) => (StatusCode::OK, shell(language, domain.as_str(), page)),
        _ => (StatusCode::NOT_FOUND, not_found(language)),
    };
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html,
    )
        .into_response();
    let headers = response.headers_mut();
    common_headers(headers);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Stored origins were checked when set; should one not make a header, no frame.
    let csp = HeaderValue::from_str(&content_security_policy(&ancestors)).unwrap_or_else(|_| {
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'",
        )
    });
    headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    headers.insert(
        "cross-origin-embedder-policy",
        HeaderValue::from_static("credentialless"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("cross-origin"),
    );
    response
}

/// The page shell: the header, the navigation, the catalogue for the script, and the
/// place the script fills.
fn shell(language: Language, domain: &str, page: Page) -> String {
    let strings = language.strings();
    let text = |key: &str| escape(strings.get(key));
    let lang = language.tag();
    let domain_html = escape(domain);
    let links: String = Page::ALL
        .iter()
        .map(|&each| {
            let current = if each == page {
                " aria-current=\"page\""
            } else {
                ""
            };
            format!(
                "<a href=\"/{lang}/website/{domain_html}/{name}\" data-page=\"{name}\"{current}>{label}</a>",
                name = each.as_str(),
                label = text(&format!("page.{}", each.as_str())),
            )
        })
        .collect();
    let languages: String = Language::ALL
        .iter()
        .map(|&other| {
            let current = if other == language {
                " aria-current=\"true\""
            } else {
                ""
            };
            format!(
                "<a href=\"/{tag}/website/{domain_html}/{name}\" data-lang=\"{tag}\" hreflang=\"{tag}\" lang=\"{tag}\"{current}>{label}</a>",
                tag = other.tag(),
                name = page.as_str(),
                label = escape(other.name()),
            )
        })
        .collect();
    format!(
        "<!doctype html>\n<html lang=\"{lang}\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <title>{title} · {domain_html}</title>\n\
         <link rel=\"stylesheet\" href=\"{ASSET_PATH}/uPlot.min.css\">\n\
         <link rel=\"stylesheet\" href=\"{ASSET_PATH}/style.css\">\n\
         <script src=\"{ASSET_PATH}/uPlot.iife.min.js\" defer></script>\n\
         <script type=\"module\" src=\"{ASSET_PATH}/app.js\"></script>\n\
         </head>\n<body>\n\
         <header class=\"top\">\n<p class=\"product\">{product}</p>\n<h1>{domain_html}</h1>\n\
         <nav class=\"pages\" aria-label=\"{pages}\">{links}</nav>\n\
         <nav class=\"languages\" aria-label=\"{language_label}\">{languages}</nav>\n</header>\n\
         <main id=\"app\" data-page=\"{page}\" data-domain=\"{domain_html}\" data-lang=\"{lang}\" tabindex=\"-1\">\n\
         <p class=\"loading\" role=\"status\">{loading}</p>\n\
         <noscript><p class=\"problem\">{noscript}</p></noscript>\n</main>\n\
         <script type=\"application/json\" id=\"strings\">{catalogue}</script>\n\
         </body>\n</html>\n",
        title = text(&format!("page.{}", page.as_str())),
        product = text("product"),
        pages = text("nav.pages"),
        language_label = text("nav.language"),
        page = page.as_str(),
        loading = text("loading"),
        noscript = text("noscript"),
        catalogue = strings.script_json(),
    )
}

/// The page of an address that names no page or no valid domain.
fn not_found(language: Language) -> String {
    let strings = language.strings();
    format!(
        "<!doctype html>\n<html lang=\"{lang}\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<link rel=\"stylesheet\" href=\"{ASSET_PATH}/style.css\">\n\
         </head>\n<body>\n<main>\n<h1>{title}</h1>\n<p class=\"problem\">{text}</p>\n</main>\n\
         </body>\n</html>\n",
        lang = language.tag(),
        title = escape(strings.get("notfound.title")),
        text = escape(strings.get("notfound.text")),
    )
}

#[cfg(test)]
mod tests;
