//! The gRPC port's service: `ShouldRateLimit`, nearly every call the port gets, goes
//! straight to its handler; every other path (health, RLQS, unknown methods) through
//! tonic's router.
//!
//! tonic's `Routes` is an axum router: per call it matches the path, clones a boxed
//! service, boxes the request body twice (axum's body, then tonic's) and maps the response
//! back. For the one hot method that is all overhead: the handler gets the body boxed once,
//! as tonic's own `Body`. Measured with `scripts/cpu-compare.sh` (BENCHMARKS.md, "CPU per
//! decision").

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::Either;
use hyper::body::Incoming;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::service::Routes;

/// Calls to `path` go to `direct`, the rest through `routes`.
#[derive(Clone)]
pub struct GrpcRoutes<S> {
    path: &'static str,
    direct: S,
    routes: Routes,
}

impl<S> GrpcRoutes<S> {
    /// `routes` must route `path` to `direct` too: calls reach it either way.
    pub(super) fn new(path: &'static str, direct: S, routes: Routes) -> Self {
        GrpcRoutes {
            path,
            direct,
            routes,
        }
    }

    /// Add services to the routed side (RLQS).
    pub fn add_routes(self, add: impl FnOnce(Routes) -> Routes) -> Self {
        GrpcRoutes {
            routes: add(self.routes),
            ..self
        }
    }
}

impl<S> Service<http::Request<Incoming>> for GrpcRoutes<S>
where
    S: Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
            Future = BoxFuture<http::Response<Body>, Infallible>,
        >,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Either<
        BoxFuture<http::Response<Body>, Infallible>,
        <Routes as Service<http::Request<Incoming>>>::Future,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Both sides are always ready (tonic's router and the handler alike).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Incoming>) -> Self::Future {
        if req.uri().path() == self.path {
            Either::Left(self.direct.call(req.map(Body::new)))
        } else {
            Either::Right(self.routes.call(req))
        }
    }
}
