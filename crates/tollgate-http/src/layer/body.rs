//! The response body of [`RateLimitService`](crate::RateLimitService): the
//! inner service's body, holding the in-flight permits of a concurrency
//! policy until it ends, or a refusal's body built by the layer.

use core::pin::Pin;
use core::task::{Context, Poll};
use std::boxed::Box;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::gate::Permit;

/// The in-flight permits a response holds: a concurrency policy's permit
/// (global, route) stays taken until the response body has been sent or
/// dropped. Boxed, and only when there is a lease to hold (a rate limit's
/// permits are spent at once): every other response carries one empty
/// pointer, which keeps the layer's future and body small.
///
/// (`pub` in this private module only so that the sealed [`BodyMode`]
/// can name it; nothing outside the crate can.)
#[derive(Debug, Default)]
pub struct Held(Option<Box<Leases>>);

#[derive(Debug)]
pub struct Leases {
    #[allow(dead_code)] // held for its drop: it gives the permits back
    global: Option<Permit>,
    #[allow(dead_code)]
    route: Option<Permit>,
}

impl Held {
    /// Holds those of `global` and `route` that hold in-flight permits.
    pub(crate) fn new(global: Option<Permit>, route: Option<Permit>) -> Self {
        let global = global.filter(Permit::holds_in_flight);
        let route = route.filter(Permit::holds_in_flight);
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
    /// The response body of [`RateLimitService`](crate::RateLimitService).
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

    /// A body of `data` built by the layer (a refusal; empty data: no
    /// frame).
    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
            held: Held::default(),
        }
    }

    /// True while the body holds a concurrency policy's in-flight permit.
    pub fn holds_in_flight(&self) -> bool {
        !self.held.is_empty()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// How a layer's responses carry their bodies: the type parameter of
/// [`RateLimitLayer`](crate::RateLimitLayer) and
/// [`RateLimitService`](crate::RateLimitService). Sealed: [`Wrapped`] (the
/// default: any body, in a [`RateLimitBody`]) or [`AxumBody`] (axum's own
/// `Body`; feature `axum`).
pub trait BodyMode<R>: sealed::Sealed + Send + Sync + 'static {
    /// The body of the layer's responses when the inner service answers
    /// with bodies of type `R`.
    type Body: Send + 'static;

    /// An admitted response's body: the inner service's, holding `held`'s
    /// in-flight permits until it ends.
    #[doc(hidden)]
    fn admitted(body: R, held: Held) -> Self::Body;

    /// A body built by the layer (a refusal): `data`, or nothing if empty.
    #[doc(hidden)]
    fn built(data: Bytes) -> Self::Body;
}

/// The default [`BodyMode`]: responses carry a [`RateLimitBody`] around
/// the inner service's body, whatever its type (axum, hyper, tonic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Wrapped;

impl sealed::Sealed for Wrapped {}

impl<R: Send + 'static> BodyMode<R> for Wrapped {
    type Body = RateLimitBody<R>;

    #[inline]
    fn admitted(body: R, held: Held) -> Self::Body {
        RateLimitBody::holding(body, held)
    }

    fn built(data: Bytes) -> Self::Body {
        RateLimitBody::full(data)
    }
}

/// The [`BodyMode`] of [`RateLimitLayer::for_axum`](crate::RateLimitLayer::for_axum)
/// (feature `axum`): responses carry axum's own
/// [`Body`](axum_core::body::Body), so that axum's `Router::layer` and
/// `route_layer` take them as they are instead of boxing each body into a
/// new `Body` (one allocation and one free per response, about 80 ns). An
/// admitted response's body is the handler's unchanged, except while a
/// concurrency policy's in-flight permit must outlive the handler: then
/// the layer boxes a [`RateLimitBody`] that holds it into the `Body`.
#[cfg(feature = "axum")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AxumBody;

#[cfg(feature = "axum")]
impl sealed::Sealed for AxumBody {}

#[cfg(feature = "axum")]
impl BodyMode<axum_core::body::Body> for AxumBody {
    type Body = axum_core::body::Body;

    #[inline]
    fn admitted(body: Self::Body, held: Held) -> Self::Body {
        if held.is_empty() {
            body
        } else {
            axum_core::body::Body::new(RateLimitBody::holding(body, held))
        }
    }

    fn built(data: Bytes) -> Self::Body {
        if data.is_empty() {
            axum_core::body::Body::empty()
        } else {
            axum_core::body::Body::from(data)
        }
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
