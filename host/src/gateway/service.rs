//! The interface between the listeners and what answers requests: a
//! [`RequestHandler`] takes one request and its connection's facts and gives one
//! response. The data plane ([`super::Gateway`]) is one; [`Services`] puts services
//! (the management API, the dashboard) in front of it by host name.

use super::connection::ConnectionInfo;
use super::host_name::{canonical_host, request_host};
use super::pages::{self, Body, BoxError};
use arc_swap::ArcSwap;
use futures_util::future::Either;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

/// A boxed future, for object-safe traits.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The body of a client's request: none for the listener's own HTTP/1.1 loop (it serves
/// only requests without one), hyper's for the rest of HTTP/1.1 and HTTP/2, the QUIC
/// stream's for HTTP/3.
pub trait RequestBody:
    hyper::body::Body<Data = bytes::Bytes, Error: Into<BoxError>> + Send + Sync + 'static
{
}

impl<B> RequestBody for B where
    B: hyper::body::Body<Data = bytes::Bytes, Error: Into<BoxError>> + Send + Sync + 'static
{
}

/// Answers the requests a listener reads. It never fails: every failure is a response.
pub trait RequestHandler: Send + Sync + 'static {
    fn handle<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
    ) -> impl Future<Output = Response<Body>> + Send;

    /// [`RequestHandler::handle`]'s future, put on the heap where it is made: a server
    /// that runs each request as a task of its own (HTTP/2's streams) then moves a
    /// pointer, not the data plane's large future (copied whole at every move).
    fn handle_boxed<'a, B: RequestBody>(
        &'a self,
        request: Request<B>,
        connection: &'a ConnectionInfo,
    ) -> BoxFuture<'a, Response<Body>> {
        Box::pin(self.handle(request, connection))
    }
}

impl<H: RequestHandler> RequestHandler for Arc<H> {
    fn handle<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
    ) -> impl Future<Output = Response<Body>> + Send {
        (**self).handle(request, connection)
    }

    fn handle_boxed<'a, B: RequestBody>(
        &'a self,
        request: Request<B>,
        connection: &'a ConnectionInfo,
    ) -> BoxFuture<'a, Response<Body>> {
        (**self).handle_boxed(request, connection)
    }
}

/// A service mounted on a listener by host name, such as an axum `Router`.
pub trait MountedService: Send + Sync + 'static {
    fn call(
        &self,
        request: Request<axum::body::Body>,
        connection: &ConnectionInfo,
    ) -> BoxFuture<'static, Response<Body>>;
}

/// An axum router sees the client's address as `ConnectInfo<SocketAddr>`, as it would
/// behind `into_make_service_with_connect_info`.
impl MountedService for axum::Router {
    fn call(
        &self,
        mut request: Request<axum::body::Body>,
        connection: &ConnectionInfo,
    ) -> BoxFuture<'static, Response<Body>> {
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(connection.client));
        let mut router = self.clone();
        Box::pin(async move {
            let answered: Result<_, Infallible> =
                tower_service::Service::call(&mut router, request).await;
            let Ok(response) = answered;
            response.map(|body| body.map_err(BoxError::from).boxed_unsync())
        })
    }
}

/// `host` as a mounted name is kept: any host name a website's could be (the model's
/// check), in its canonical ASCII form.
pub fn host_name(host: &str) -> Result<String, MountError> {
    botgate_model::Subdomain::parse(&canonical_host(host))
        .map(|name| name.as_str().to_owned())
        .map_err(|_| MountError::NotAHostName(host.to_owned()))
}

/// The services mounted by host name, shared by the listeners that serve them and
/// changed while they run (a reload's `--api-host`).
#[derive(Clone, Default)]
pub struct Mounts {
    by_host: Arc<ArcSwap<HashMap<String, Arc<dyn MountedService>>>>,
}

impl Mounts {
    /// Mounts `service` on the host name `host`. It takes the name from the fallback:
    /// a website of that name is not reached through these services.
    pub fn mount(&self, host: &str, service: Arc<dyn MountedService>) -> Result<(), MountError> {
        let name = host_name(host)?;
        if self.by_host.load().contains_key(&name) {
            return Err(MountError::Taken(name));
        }
        self.by_host.rcu(|mounted| {
            let mut mounted = HashMap::clone(mounted);
            mounted.insert(name.clone(), service.clone());
            mounted
        });
        Ok(())
    }

    /// Gives `host` back to the fallback, from the next request on.
    pub fn unmount(&self, host: &str) {
        self.by_host.rcu(|mounted| {
            let mut mounted = HashMap::clone(mounted);
            mounted.remove(host);
            mounted
        });
    }

    /// The host names mounted, sorted.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self.by_host.load().keys().cloned().collect();
        hosts.sort();
        hosts
    }
}

/// Services by host name in front of a fallback handler (the data plane): a request
/// whose host (canonical, as [`request_host`] reads it) is mounted goes to that service,
/// any other to the fallback. With nothing mounted a request costs one length check.
/// On plain HTTP ([`Services::redirecting`]) a mounted name is sent to HTTPS instead.
/// Mounted services keep their own logs: the access log and the request metrics are the
/// data plane's. The API refuses websites with a mounted name (`ApiConfig::reserved_hosts`).
pub struct Services<H> {
    fallback: H,
    mounted: Mounts,
    redirect_to_https: bool,
}

/// Why a service could not be mounted.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("`{0}` is not a host name (letters, digits, `-` and `.`, no port)")]
    NotAHostName(String),
    #[error("`{0}` is mounted already")]
    Taken(String),
}

impl<H: RequestHandler> Services<H> {
    pub fn new(fallback: H, mounted: Mounts) -> Services<H> {
        Services {
            fallback,
            mounted,
            redirect_to_https: false,
        }
    }

    /// Services for a plain-HTTP listener: a mounted name answers a permanent redirect
    /// (301) to the same target over HTTPS, except an ACME CA's HTTP-01 request, which
    /// goes to the fallback (it answers for mounted names awaiting a certificate).
    pub fn redirecting(fallback: H, mounted: Mounts) -> Services<H> {
        Services {
            redirect_to_https: true,
            ..Services::new(fallback, mounted)
        }
    }

    /// The mounted service a request's host names, and that host; none for an ACME
    /// HTTP-01 request on a plain-HTTP listener (the fallback answers it).
    fn mounted_for<B>(&self, request: &Request<B>) -> Option<(String, Arc<dyn MountedService>)> {
        let mounted = self.mounted.by_host.load();
        if mounted.is_empty()
            || (self.redirect_to_https
                && request.uri().path().starts_with(super::ACME_HTTP01_PREFIX))
        {
            return None;
        }
        let host = request_host(request)?;
        let service = mounted.get(&host)?.clone();
        Some((host, service))
    }
}

impl<H: RequestHandler> RequestHandler for Services<H> {
    fn handle<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
    ) -> impl Future<Output = Response<Body>> + Send {
        // The fallback's future is returned as it is, not awaited inside another: a
        // request to the data plane costs no copy of its (large) future.
        match self.mounted_for(&request) {
            None => Either::Left(self.fallback.handle(request, connection)),
            Some((host, service)) => {
                Either::Right(self.mounted(request, connection, &host, service))
            }
        }
    }

    fn handle_boxed<'a, B: RequestBody>(
        &'a self,
        request: Request<B>,
        connection: &'a ConnectionInfo,
    ) -> BoxFuture<'a, Response<Body>> {
        // The data plane's future boxed as it is, not inside the `Either`.
        match self.mounted_for(&request) {
            None => self.fallback.handle_boxed(request, connection),
            Some((host, service)) => self.mounted(request, connection, &host, service),
        }
    }
}

impl<H: RequestHandler> Services<H> {
    /// A mounted name's answer: the redirect to HTTPS on a plain-HTTP listener, else
    /// the mounted service's.
    fn mounted<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
        host: &str,
        service: Arc<dyn MountedService>,
    ) -> BoxFuture<'static, Response<Body>> {
        if self.redirect_to_https {
            let target = request
                .uri()
                .path_and_query()
                .map_or("/", |target| target.as_str());
            // A dashboard address with a user's key came in clear: not repeated in a
            // `Location`, and the panel's frame shows what to fix.
            let answer = if botgate_model::dashboard::redact_api_key(target) != target {
                pages::page(
                    StatusCode::BAD_REQUEST,
                    "Open the dashboard over HTTPS",
                    "This address carries a key and came over plain HTTP. Frame the \
                     dashboard with its https:// address, and have the key replaced.",
                )
            } else {
                pages::moved_permanently(&format!("https://{host}{target}"))
            };
            return Box::pin(std::future::ready(answer));
        }
        service.call(request.map(axum::body::Body::new), connection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Empty;

    /// A handler that answers every request with its host header, as the data plane
    /// stands in for here.
    struct Fallback;

    impl RequestHandler for Fallback {
        async fn handle<B: RequestBody>(
            &self,
            _request: Request<B>,
            _connection: &ConnectionInfo,
        ) -> Response<Body> {
            Response::new(pages::full("data plane"))
        }
    }

    async fn answer(services: &Services<Fallback>, host: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .uri("/who")
            .header(http::header::HOST, host)
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let connection = ConnectionInfo::new("192.0.2.9:5000".parse().unwrap(), true, false, None);
        let response = services.handle(request, &connection).await;
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_mounted_host_reaches_its_service_and_every_other_the_fallback() {
        let router = axum::Router::new().route(
            "/who",
            axum::routing::get(
                |axum::extract::ConnectInfo(client): axum::extract::ConnectInfo<
                    std::net::SocketAddr,
                >| async move { format!("api for {client}") },
            ),
        );
        let mounts = Mounts::default();
        let services = Services::new(Fallback, mounts.clone());
        mounts
            .mount("API.Example.", Arc::new(router.clone()))
            .unwrap();
        assert_eq!(mounts.hosts(), ["api.example"]);
        for refused in ["api.example", "api.example:8443", "", "a..b", "a/b", "-"] {
            assert!(
                mounts.mount(refused, Arc::new(router.clone())).is_err(),
                "{refused:?}"
            );
        }
        assert_eq!(
            answer(&services, "api.example:8443").await,
            (StatusCode::OK, "api for 192.0.2.9:5000".to_owned())
        );
        assert_eq!(
            answer(&services, "Api.Example").await,
            (StatusCode::OK, "api for 192.0.2.9:5000".to_owned())
        );
        for other in ["shop.example", "sub.api.example", "api.example.org"] {
            assert_eq!(
                answer(&services, other).await,
                (StatusCode::OK, "data plane".to_owned()),
                "{other}"
            );
        }

        // On plain HTTP the mounted name goes to HTTPS; every other to the fallback.
        let plain = Services::redirecting(Fallback, mounts.clone());
        let request = Request::builder()
            .method("POST")
            .uri("/v1.0/user?x=1")
            .header(http::header::HOST, "Api.Example:8180")
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let connection = ConnectionInfo::new("192.0.2.9:5000".parse().unwrap(), false, false, None);
        let response = plain.handle(request, &connection).await;
        assert_eq!(response.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(
            response.headers()[http::header::LOCATION],
            "https://api.example/v1.0/user?x=1"
        );
        // Not a dashboard address carrying a key: it is not repeated in a redirect.
        let request = Request::builder()
            .uri("/en/website/shop.example/edit?api%2Dkey=bgu_secret")
            .header(http::header::HOST, "api.example")
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = plain.handle(request, &connection).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(response.headers().get(http::header::LOCATION).is_none());
        // Except what an ACME CA asks for: the data plane answers it.
        let request = Request::builder()
            .uri("/.well-known/acme-challenge/token")
            .header(http::header::HOST, "api.example")
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = plain.handle(request, &connection).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            answer(&plain, "shop.example").await,
            (StatusCode::OK, "data plane".to_owned())
        );

        // Unmounted, the name is the fallback's again on both listeners at once.
        mounts.unmount("api.example");
        assert!(mounts.hosts().is_empty());
        for listener in [&services, &plain] {
            assert_eq!(
                answer(listener, "api.example").await,
                (StatusCode::OK, "data plane".to_owned())
            );
        }
    }
}
