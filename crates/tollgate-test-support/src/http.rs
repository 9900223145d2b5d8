//! HTTP test helpers: an axum server on an ephemeral loopback port and a
//! small real HTTP/1.1 client over TCP (one connection per request, so a
//! test can choose the source address among 127.0.0.0/8 and send headers
//! byte for byte, malformed ones included).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::any;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::JoinHandle;
use tollgate::http::RateLimitLayer;
use tollgate::{Clock, TokioClock};

/// Reads the peer address from axum's `ConnectInfo`.
pub fn connect_info(ext: &::http::Extensions) -> Option<SocketAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

/// A router answering 200 "ok" on every path and method, behind `layer`.
pub fn hello(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", any(|| async { "ok" }))
        .route("/{*rest}", any(|| async { "ok" }))
        .layer(layer)
}

/// As [`hello`], with each response marked by [`MarkWait`] (outside the
/// rate limiter): whether it was decided at once and when it was ready.
pub fn hello_marked(layer: RateLimitLayer) -> Router {
    hello(layer).layer(MarkWaitLayer)
}

/// Now on tokio's clock, as the time since the process origin every
/// tollgate std clock shares (what a [`TokioClock`] reads): the time line
/// [`Resp::ready_at`] is on. Under real time the OS clock; under tokio's
/// paused time, tokio's time (the time the layer sees when built with
/// [`paused_clock`]).
pub fn now() -> Duration {
    TokioClock::new().now().elapsed_since_origin()
}

/// The clock a test on tokio's paused time gives the layer
/// (`RateLimitLayerBuilder::clock`): its buckets then move with
/// `tokio::time::advance` and with tokio's auto-advance, as the layer's
/// queueing timers do.
pub fn paused_clock() -> TokioClock {
    TokioClock::new()
}

/// Wraps [`MarkWait`] around a service.
#[derive(Debug, Clone, Copy)]
pub struct MarkWaitLayer;

impl<S> tower_layer::Layer<S> for MarkWaitLayer {
    type Service = MarkWait<S>;
    fn layer(&self, inner: S) -> MarkWait<S> {
        MarkWait(inner)
    }
}

/// Marks each response with whether the service it wraps (the rate
/// limiter) answered on the FIRST poll of its future (`x-test-wait: none`:
/// decided at once, admitted or refused without waiting) or only on a later
/// one (`waited`), and with the instant it became ready (`x-test-ready-ns`,
/// ns on tokio's clock, see [`now`]). Unlike a client's stopwatch, the first can tell "at
/// once" from "after a wait" however slowly a loaded machine delivers the
/// response.
#[derive(Debug, Clone)]
pub struct MarkWait<S>(S);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> tower_service::Service<::http::Request<B>> for MarkWait<S>
where
    S: tower_service::Service<::http::Request<B>, Response = ::http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Send + 'static,
{
    type Response = ::http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<::http::Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: ::http::Request<B>) -> Self::Future {
        let mut fut = Box::pin(self.0.call(req));
        let mut first = true;
        Box::pin(std::future::poll_fn(move |cx| {
            let at_once = std::mem::replace(&mut first, false);
            match fut.as_mut().poll(cx) {
                Poll::Ready(Ok(mut res)) => {
                    let ready = now().as_nanos().to_string();
                    let headers = res.headers_mut();
                    let wait = if at_once { "none" } else { "waited" };
                    headers.insert("x-test-wait", wait.parse().unwrap());
                    headers.insert("x-test-ready-ns", ready.parse().unwrap());
                    Poll::Ready(Ok(res))
                }
                other => other,
            }
        }))
    }
}

/// A running server; aborted on drop.
pub struct Server {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// A server already serving on `addr` in `task`.
    pub fn new(addr: SocketAddr, task: JoinHandle<()>) -> Self {
        Self { addr, task }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` on 127.0.0.1 with an ephemeral port, recording peers.
pub async fn serve(router: Router) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("serve");
    });
    Server { addr, task }
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Decided at once (see [`MarkWait`]; the server must mark responses).
    pub fn at_once(&self) -> bool {
        match self.header("x-test-wait") {
            Some("none") => true,
            Some("waited") => false,
            other => panic!("response not marked by MarkWait: {other:?}"),
        }
    }

    /// When the server had the response ready, on tokio's clock (see
    /// [`now`] and [`MarkWait`]).
    pub fn ready_at(&self) -> Duration {
        let ns = self
            .header("x-test-ready-ns")
            .and_then(|v| v.parse().ok())
            .expect("response marked by MarkWait");
        Duration::from_nanos(ns)
    }

    /// `(policy name, integer params)` of each member of a
    /// structured-field list header, parsed by the `sfv` crate (strict
    /// RFC 9651); other parameters (`qu`, `pk`) are left out: see
    /// [`Resp::sf_members`].
    pub fn sf_list(&self, name: &str) -> Vec<(String, Vec<(String, i64)>)> {
        self.sf_members(name)
            .into_iter()
            .map(|(member, params)| {
                let ints = params
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, i64::from(v.as_integer()?))))
                    .collect();
                (member, ints)
            })
            .collect()
    }

    /// `(policy name, params)` of each member of a structured-field list
    /// header, parsed by the `sfv` crate (strict RFC 9651): every member
    /// must be an sf-string item.
    pub fn sf_members(&self, name: &str) -> Vec<(String, Vec<(String, sfv::BareItem)>)> {
        let raw = self
            .header(name)
            .unwrap_or_else(|| panic!("no {name} header"));
        let list: sfv::List = sfv::Parser::new(raw)
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {raw:?} is not a structured-field list: {e}"));
        list.into_iter()
            .map(|entry| match entry {
                sfv::ListEntry::Item(item) => {
                    let name = item
                        .bare_item
                        .as_string()
                        .expect("member is an sf-string")
                        .as_str()
                        .to_string();
                    let params = item
                        .params
                        .iter()
                        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                        .collect();
                    (name, params)
                }
                sfv::ListEntry::InnerList(_) => panic!("unexpected inner list"),
            })
            .collect()
    }

    /// Names of the policies in `RateLimit-Policy`.
    pub fn policies(&self) -> Vec<String> {
        if self.header("ratelimit-policy").is_none() {
            return Vec::new();
        }
        self.sf_list("ratelimit-policy")
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    /// The `r` (remaining) of `policy` in `RateLimit`.
    pub fn remaining(&self, policy: &str) -> Option<i64> {
        self.sf_list("ratelimit")
            .into_iter()
            .find(|(n, _)| n == policy)
            .and_then(|(_, p)| p.into_iter().find(|(k, _)| k == "r").map(|(_, v)| v))
    }
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Req<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub from: IpAddr,
    pub headers: Vec<(&'a str, &'a str)>,
}

impl<'a> Req<'a> {
    pub fn get(path: &'a str) -> Self {
        Self {
            method: "GET",
            path,
            from: IpAddr::from([127, 0, 0, 1]),
            headers: Vec::new(),
        }
    }

    pub fn method(mut self, m: &'a str) -> Self {
        self.method = m;
        self
    }

    pub fn from(mut self, ip: [u8; 4]) -> Self {
        self.from = IpAddr::from(ip);
        self
    }

    pub fn header(mut self, k: &'a str, v: &'a str) -> Self {
        self.headers.push((k, v));
        self
    }
}

/// Opens a TCP connection from `from` (any 127.0.0.0/8 address) to `addr`.
pub async fn connect(addr: SocketAddr, from: IpAddr) -> tokio::net::TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from, 0)).expect("bind source");
    socket.connect(addr).await.expect("connect")
}

/// The request bytes of `req` (HTTP/1.1, `Connection: close`).
pub fn request_bytes(addr: SocketAddr, req: &Req<'_>) -> Vec<u8> {
    let mut out = format!(
        "{} {} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n",
        req.method, req.path
    );
    for (k, v) in &req.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// Sends `req` to `addr` and reads the whole response (10 s cap).
///
/// Not for tests on paused time: use [`send_paused`] there.
pub async fn send(addr: SocketAddr, req: Req<'_>) -> Resp {
    tokio::time::timeout(Duration::from_secs(10), send_paused(addr, req))
        .await
        .expect("response within 10 s")
}

/// Sends `req` to `addr` and reads the whole response, with no timeout:
/// for tests on tokio's paused time. A client timeout is a tokio timer, and
/// paused time jumps to the next timer whenever every task waits (on a
/// socket, say): it would move the buckets under test by the timeout.
pub async fn send_paused(addr: SocketAddr, req: Req<'_>) -> Resp {
    let mut stream = connect(addr, req.from).await;
    stream
        .write_all(&request_bytes(addr, &req))
        .await
        .expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    parse_response(&raw)
}

/// Parses an HTTP/1.1 response with a `content-length` or chunked body.
pub fn parse_response(raw: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("complete head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header line");
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A keep-alive HTTP/1.1 connection (responses must carry
/// `content-length`, as axum's do).
pub struct Conn {
    stream: tokio::net::TcpStream,
    addr: SocketAddr,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Self {
        Self {
            stream: connect(addr, IpAddr::from([127, 0, 0, 1])).await,
            addr,
            buf: Vec::new(),
        }
    }

    /// Sends a GET of `path` and reads one response.
    pub async fn get(&mut self, path: &str) -> Resp {
        let req = format!("GET {path} HTTP/1.1\r\nhost: {}\r\n\r\n", self.addr);
        self.stream.write_all(req.as_bytes()).await.expect("write");
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("content-length");
                let total = end + 4 + len;
                if self.buf.len() >= total {
                    let resp = parse_response(&self.buf[..total]);
                    self.buf.drain(..total);
                    return resp;
                }
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed mid-response");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A response body of `left` chunks (`tick\n`), one every `every`: a
/// streaming handler's body, still being sent after the handler returned.
pub struct Ticks {
    left: u32,
    every: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Ticks {
    /// `chunks` chunks, `every` apart.
    pub fn new(chunks: u32, every: Duration) -> Self {
        Self {
            left: chunks,
            every,
            sleep: None,
        }
    }
}

impl http_body::Body for Ticks {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let every = self.every;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
        std::task::ready!(sleep.as_mut().poll(cx));
        self.sleep = None;
        self.left -= 1;
        Poll::Ready(Some(Ok(http_body::Frame::data(bytes::Bytes::from_static(
            b"tick\n",
        )))))
    }
}

/// Sends `GET path` from `from` and reads until the first chunk of a
/// [`Ticks`] body arrived: the connection and what was read.
pub async fn start_stream(
    addr: SocketAddr,
    path: &str,
    from: [u8; 4],
) -> (tokio::net::TcpStream, Vec<u8>) {
    let mut c = connect(addr, from.into()).await;
    c.write_all(&request_bytes(addr, &Req::get(path).from(from)))
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("tick") {
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("first chunk within 5 s")
            .unwrap();
        assert!(n > 0, "closed before the first chunk");
        got.extend_from_slice(&buf[..n]);
    }
    (c, got)
}

/// A tower service that answers every request 200 with an empty body,
/// allocating nothing: the inner service for tests that call the layer as
/// a service, without a server.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmptyOk;

impl<B> tower_service::Service<::http::Request<B>> for EmptyOk {
    type Response = ::http::Response<String>;
    type Error = core::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: ::http::Request<B>) -> Self::Future {
        std::future::ready(Ok(::http::Response::new(String::new())))
    }
}
