//! The tower plumbing: the [`RateLimitService`] a [`RateLimitLayer`]
//! makes, its [`Service`] impl sending each request down the path its
//! verdict names (admitted, answered at once, in a line, or to a remote
//! backend), and its [`ResponseFuture`].

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::boxed::Box;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::body::{BodyMode, Held, Wrapped};
use super::decide::Verdict;
use super::rejection::SuccessHeaders;
use super::remote::serve_remote;
use super::{RateLimitLayer, Shared, in_line};

impl<S, M> Layer<S> for RateLimitLayer<M> {
    type Service = RateLimitService<S, M>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            cell: Arc::clone(&self.cell),
            only: self.only.clone(),
            mode: PhantomData,
        }
    }
}

/// The service made by [`RateLimitLayer`]; `M` is the layer's
/// [`BodyMode`].
pub struct RateLimitService<S, M = Wrapped> {
    inner: S,
    cell: Arc<ArcSwap<Shared>>,
    only: Option<Arc<str>>,
    mode: PhantomData<fn() -> M>,
}

impl<S: Clone, M> Clone for RateLimitService<S, M> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            cell: Arc::clone(&self.cell),
            only: self.only.clone(),
            mode: PhantomData,
        }
    }
}

impl<S: core::fmt::Debug, M> core::fmt::Debug for RateLimitService<S, M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B, R, M> Service<Request<B>> for RateLimitService<S, M>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: Send + 'static,
    M: BodyMode<R>,
{
    type Response = Response<M::Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, R, M, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let current = self.cell.load();
        let kind = match current.decide::<B, R, M>(&req, self.only.as_deref()) {
            // built in the return slot: the admitted path copies no future
            Verdict::Pass(headers, held) => {
                return ResponseFuture {
                    kind: Kind::Inner {
                        fut: self.inner.call(req),
                        headers,
                        held: Some(held),
                    },
                };
            }
            Verdict::Respond(r) => Kind::Ready { response: Some(r) },
            Verdict::Remote(remote) => {
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                let shared = Arc::clone(&current);
                Kind::Boxed {
                    fut: Box::pin(serve_remote::<S, B, R, M>(shared, *remote, inner, req)),
                }
            }
            Verdict::Line(line) => {
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                let shared = Arc::clone(&current);
                Kind::Boxed {
                    fut: Box::pin(in_line::serve_in_line::<S, B, R, M>(
                        shared, *line, inner, req,
                    )),
                }
            }
        };
        ResponseFuture { kind }
    }
}
/// What the inner service's future resolves to, boxed (a request that
/// waits its turn or asks a remote backend).
type BoxedResponse<O, E> = Pin<Box<dyn Future<Output = Result<Response<O>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimitService`]: the inner service's future `F`
    /// (answering with bodies of type `R`), answering with the
    /// [`BodyMode`] `M`'s bodies.
    pub struct ResponseFuture<F, R, M, E>
    where
        M: BodyMode<R>,
    {
        #[pin]
        kind: Kind<F, R, M, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, R, M, E>
    where
        M: BodyMode<R>,
    {
        // Admitted: the inner service's future, then headers to add and
        // in-flight permits to hand to the body.
        // (Headers are boxed: they are rare, and the future stays small.)
        Inner { #[pin] fut: F, headers: Option<Box<SuccessHeaders>>, held: Option<Held> },
        // Refused (or no key): the response is ready (boxed: a response
        // is large, and every request's future would be as large).
        Ready { response: Option<Box<Response<M::Body>>> },
        // Waiting its turn (a queueing policy) or a remote backend's
        // decision, then the inner service.
        Boxed { fut: BoxedResponse<M::Body, E> },
    }
}

impl<F, R, M: BodyMode<R>, E> core::fmt::Debug for ResponseFuture<F, R, M, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<F, R, M, E> Future for ResponseFuture<F, R, M, E>
where
    F: Future<Output = Result<Response<R>, E>>,
    M: BodyMode<R>,
{
    type Output = Result<Response<M::Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { fut, headers, held } => {
                let mut res = core::task::ready!(fut.poll(cx))?;
                if let Some(h) = headers.take() {
                    h.add_to(&mut res);
                }
                let held = held.take().unwrap_or_default();
                Poll::Ready(Ok(res.map(|b| M::admitted(b, held))))
            }
            KindProj::Ready { response } => match response.take() {
                Some(r) => Poll::Ready(Ok(*r)),
                None => Poll::Pending,
            },
            KindProj::Boxed { fut } => fut.as_mut().poll(cx),
        }
    }
}
