//! The interface between the listeners and what answers requests: a
//! [`RequestHandler`] takes one request and its connection's facts and gives one
//! response. The data plane ([`super::Gateway`]) is one; [`Services`] puts services
//! (the management API, the dashboard) in front of it by host name.

use super::connection::ConnectionInfo;
use super::host_name::{canonical_host, request_host};
use super::pages::{Body, BoxError};
use http::{Request, Response};
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
}

impl<H: RequestHandler> RequestHandler for Arc<H> {
    fn handle<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
    ) -> impl Future<Output = Response<Body>> + Send {
        (**self).handle(request, connection)
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

/// Services by host name in front of a fallback handler (the data plane): a request
/// whose host (canonical, as [`request_host`] reads it) is mounted goes to that service,
/// any other to the fallback. With nothing mounted a request costs one length check.
pub struct Services<H> {
    fallback: H,
    mounted: HashMap<String, Arc<dyn MountedService>>,
}

impl<H: RequestHandler> Services<H> {
    pub fn new(fallback: H) -> Services<H> {
        Services {
            fallback,
            mounted: HashMap::new(),
        }
    }

    /// Mounts `service` on the host name `host`, in place of whatever had it. It takes
    /// the name from the fallback: a website of that name is not reached here.
    pub fn mount(&mut self, host: &str, service: Arc<dyn MountedService>) {
        self.mounted.insert(canonical_host(host), service);
    }

    /// The host names mounted.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.mounted.keys().map(String::as_str)
    }

    fn mounted_for<B>(&self, request: &Request<B>) -> Option<&Arc<dyn MountedService>> {
        if self.mounted.is_empty() {
            return None;
        }
        self.mounted.get(&request_host(request)?)
    }
}

impl<H: RequestHandler> RequestHandler for Services<H> {
    fn handle<B: RequestBody>(
        &self,
        request: Request<B>,
        connection: &ConnectionInfo,
    ) -> impl Future<Output = Response<Body>> + Send {
        let mounted = self.mounted_for(&request).cloned();
        async move {
            match mounted {
                Some(service) => {
                    service
                        .call(request.map(axum::body::Body::new), connection)
                        .await
                }
                None => self.fallback.handle(request, connection).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::pages;
    use http::StatusCode;
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
        let mut services = Services::new(Fallback);
        services.mount("API.Example.", Arc::new(router));
        assert_eq!(services.hosts().collect::<Vec<_>>(), ["api.example"]);
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
    }
}
