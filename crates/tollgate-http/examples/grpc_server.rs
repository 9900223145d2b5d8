//! A tonic server behind the rate-limiting layer, and a tonic client that
//! calls it until it is refused: the refusal is RESOURCE_EXHAUSTED, and
//! the client reads when to retry from its `RetryInfo` (feature `grpc`).
//!
//! ```text
//! cargo run -p tollgate-http --example grpc_server
//! ```
//!
//! The server is the standard gRPC health service (`tonic-health`), on
//! 127.0.0.1 with an ephemeral port; the health service's methods get 2
//! calls per minute per peer IP.

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tonic::transport::Channel;
use tonic::transport::server::TcpConnectInfo;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let layer = RateLimitLayer::builder()
        // tonic records the peer as its `TcpConnectInfo`
        .peer_addr(|ext| ext.get::<TcpConnectInfo>()?.remote_addr())
        .policy(
            Policy::token_bucket("health", Quota::per_minute(2)?)
                .prefix("/grpc.health.v1.Health")
                .key(KeySource::PeerIp),
        )
        .build()?;
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    println!("serving grpc.health.v1.Health on {addr}");

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    for call in 1..=3 {
        match client.check(HealthCheckRequest::default()).await {
            Ok(response) => {
                println!(
                    "call {call}: serving status {}",
                    response.into_inner().status
                );
            }
            Err(status) => {
                let wait = status.get_details_retry_info().and_then(|r| r.retry_delay);
                let quota = status.get_details_quota_failure();
                println!(
                    "call {call}: {:?} {:?}, retry in {wait:?}, quota {:?}",
                    status.code(),
                    status.message(),
                    quota.map(|q| q.violations)
                );
            }
        }
    }
    Ok(())
}
