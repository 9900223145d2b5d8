//! The response body of [`RateLimitService`](super::RateLimitService): the
//! inner service's body, holding the in-flight permits of a concurrency
//! policy until it ends, or a refusal's body built by the layer.

use core::pin::Pin;
use core::task::{Context, Poll};
use std::boxed::Box;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::layer::HttpLease;

/// The in-flight leases a response holds: a concurrency policy's permit
/// (global, route) stays taken until the response body has been sent or
/// dropped. Boxed, and only when there is a lease to hold (a rate limit's
/// permits are spent at once): every other response carries one empty
/// pointer, which keeps the layer's future and body small.
#[derive(Debug, Default)]
pub(crate) struct Held(Option<Box<Leases>>);

#[derive(Debug)]
struct Leases {
    #[allow(dead_code)] // held for its drop: it gives the permits back
    global: Option<HttpLease>,
    #[allow(dead_code)]
    route: Option<HttpLease>,
}

impl Held {
    /// Holds those of `global` and `route` that hold in-flight permits.
    pub(crate) fn new(global: Option<HttpLease>, route: Option<HttpLease>) -> Self {
        let global = global.filter(HttpLease::holds_in_flight);
        let route = route.filter(HttpLease::holds_in_flight);
        if global.is_none() && route.is_none() {
            return Self(None);
        }
        Self(Some(Box::new(Leases { global, route })))
    }

    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

pin_project! {
    /// The response body of [`RateLimitService`](super::RateLimitService).
    ///
    /// An admitted response carries the inner service's body unchanged
    /// (frames, trailers, size hint and end of stream are forwarded); when
    /// a concurrency policy admitted the request, the body also holds its
    /// in-flight permit and gives it back when the body ends (its last
    /// frame, or an error) or is dropped (the client went away). A refusal
    /// the layer built carries its handler's text, or nothing.
    ///
    /// It implements [`http_body::Body`] with the inner body's `Data`
    /// (which must be buildable from [`Bytes`], as axum's, hyper's and
    /// tonic's are) and `Error`, so axum's `Router::layer` and
    /// `route_layer` accept the layer.
    pub struct RateLimitBody<B> {
        #[pin]
        kind: Kind<B>,
        held: Held,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { data: Option<Bytes> },
    }
}

impl<B> core::fmt::Debug for RateLimitBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitBody")
            .field(
                "kind",
                &match &self.kind {
                    Kind::Inner { .. } => "inner",
                    Kind::Full { .. } => "full",
                },
            )
            .field("holds_in_flight", &!self.held.is_empty())
            .finish()
    }
}

impl<B> RateLimitBody<B> {
    /// The inner service's body, holding no permit.
    pub fn new(body: B) -> Self {
        Self::holding(body, Held::default())
    }

    pub(crate) fn holding(body: B, held: Held) -> Self {
        Self {
            kind: Kind::Inner { body },
            held,
        }
    }

    /// A body of `data` built by the layer (a refusal).
    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
            held: Held::default(),
        }
    }

    /// An empty body built by the layer.
    pub(crate) fn empty() -> Self {
        Self {
            kind: Kind::Full { data: None },
            held: Held::default(),
        }
    }

    /// True while the body holds a concurrency policy's in-flight permit.
    pub fn holds_in_flight(&self) -> bool {
        !self.held.is_empty()
    }
}

impl<B> Body for RateLimitBody<B>
where
    B: Body,
    B::Data: From<Bytes>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Inner { mut body } => {
                let frame = core::task::ready!(body.as_mut().poll_frame(cx));
                let ended = match &frame {
                    Some(Ok(_)) => body.is_end_stream(),
                    None | Some(Err(_)) => true,
                };
                if ended {
                    // the response is done: give the in-flight permits back
                    *this.held = Held::default();
                }
                Poll::Ready(frame)
            }
            KindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d.into())))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}
