//! A real xDS management server for tests: tonic serving envoy-types'
//! `envoy.service.discovery.v3.AggregatedDiscoveryService` (state of the world) on a
//! loopback port, optionally over (mutual) TLS.
//!
//! The test publishes snapshots (a version and its `RateLimitConfig` resources); every open
//! stream is sent the current one once it has subscribed, and again at each new version,
//! each response with a fresh nonce. Every request received (subscriptions, ACKs, NACKs) is
//! logged with the stream's gRPC metadata, for the test to inspect.
//!
//! The server runs on its own thread and runtime: `stop` drops that runtime, which closes
//! every connection at once, as a crashed or restarted management server would.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use futures::{Stream, StreamExt};
use prost::Message;
use sluice::xds::TYPE_URL;
use sluice::xds::proto::RateLimitConfig;
use tokio::sync::watch;
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

/// One published state: what every stream is sent.
#[derive(Clone)]
pub struct Snapshot {
    pub version: String,
    pub resources: Vec<RateLimitConfig>,
}

/// A request the server received, with the metadata of its stream.
#[derive(Clone, Debug)]
pub struct Received {
    pub request: DiscoveryRequest,
    pub metadata: MetadataMap,
}

/// A response the server sent.
#[derive(Clone, Debug)]
pub struct Sent {
    pub version: String,
    pub nonce: String,
}

#[derive(Default)]
struct Log {
    received: Vec<Received>,
    sent: Vec<Sent>,
    streams: usize,
}

/// State shared by the test and the server thread; survives a restart.
pub struct State {
    snapshot: watch::Sender<Option<Snapshot>>,
    log: Mutex<Log>,
    nonce: Mutex<u64>,
}

/// TLS for the server: its certificate and key, and the CA client certificates must chain
/// to (mutual TLS) when set.
#[derive(Clone)]
pub struct ServerTls {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub client_ca: Option<Vec<u8>>,
}

pub struct XdsServer {
    pub addr: SocketAddr,
    pub state: Arc<State>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl XdsServer {
    /// A plaintext server on a free loopback port, with no snapshot yet.
    pub fn start() -> XdsServer {
        XdsServer::start_on("127.0.0.1:0".parse().unwrap(), new_state(), None)
    }

    pub fn start_tls(tls: ServerTls) -> XdsServer {
        XdsServer::start_on("127.0.0.1:0".parse().unwrap(), new_state(), Some(tls))
    }

    /// A server on `addr` sharing `state` (a restart keeps the port and the log).
    pub fn start_on(addr: SocketAddr, state: Arc<State>, tls: Option<ServerTls>) -> XdsServer {
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let served = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("xDS server runtime");
            rt.block_on(async move {
                let listener = bind(addr).await;
                let _ = addr_tx.send(listener.local_addr().expect("local addr"));
                let mut builder = Server::builder();
                if let Some(t) = tls {
                    let mut config =
                        ServerTlsConfig::new().identity(Identity::from_pem(t.cert, t.key));
                    if let Some(ca) = t.client_ca {
                        config = config.client_ca_root(Certificate::from_pem(ca));
                    }
                    builder = builder.tls_config(config).expect("server TLS config");
                }
                let stop = async move {
                    // Poll the std channel without blocking the runtime.
                    while stop_rx.try_recv() == Err(std::sync::mpsc::TryRecvError::Empty) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                };
                let serve = builder
                    .add_service(AggregatedDiscoveryServiceServer::new(Ads(served)))
                    .serve_with_incoming(TcpIncoming::from(listener));
                tokio::select! {
                    _ = serve => {}
                    _ = stop => {}
                }
            });
            // Dropping the runtime here drops every connection task with it.
            drop(rt);
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("xDS server bound");
        XdsServer {
            addr,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `CONFIG_GRPC_XDS_SERVER_URL` for this server.
    pub fn url(&self) -> String {
        self.addr.to_string()
    }

    /// Publish a snapshot: every open stream is sent it.
    pub fn set(&self, version: &str, resources: Vec<RateLimitConfig>) {
        self.state.snapshot.send_replace(Some(Snapshot {
            version: version.into(),
            resources,
        }));
    }

    /// Stop as a crash would: every connection closes now.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.log.lock().unwrap().received.clone()
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.state.log.lock().unwrap().sent.clone()
    }

    pub fn streams(&self) -> usize {
        self.state.log.lock().unwrap().streams
    }

    /// Wait for a request matching `pred` (any received so far counts).
    pub async fn wait_request(
        &self,
        timeout: Duration,
        pred: impl Fn(&Received) -> bool,
    ) -> Option<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.received().into_iter().find(|r| pred(r)) {
                return Some(r);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The nonce of the response that carried `version`.
    pub fn nonce_of(&self, version: &str) -> Option<String> {
        self.sent()
            .into_iter()
            .rev()
            .find(|s| s.version == version)
            .map(|s| s.nonce)
    }
}

impl Drop for XdsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn new_state() -> Arc<State> {
    Arc::new(State {
        snapshot: watch::Sender::new(None),
        log: Mutex::new(Log::default()),
        nonce: Mutex::new(0),
    })
}

/// Bind `addr`, retrying briefly: a restart reuses the port of the server just stopped.
async fn bind(addr: SocketAddr) -> tokio::net::TcpListener {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) if Instant::now() > deadline => panic!("bind {addr}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

struct Ads(Arc<State>);

type ResponseStream = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;
type DeltaStream = Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = ResponseStream;
    type DeltaAggregatedResourcesStream = DeltaStream;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let metadata = request.metadata().clone();
        let incoming = request.into_inner();
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.0.log.lock().unwrap().streams += 1;
        tokio::spawn(serve_stream(self.0.clone(), metadata, incoming, tx));
        Ok(Response::new(Box::pin(rx.map(Ok))))
    }

    async fn delta_aggregated_resources(
        &self,
        _: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<DeltaStream>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

async fn serve_stream(
    state: Arc<State>,
    metadata: MetadataMap,
    mut incoming: Streaming<DiscoveryRequest>,
    tx: futures::channel::mpsc::UnboundedSender<DiscoveryResponse>,
) {
    let record = |request: DiscoveryRequest| {
        state.log.lock().unwrap().received.push(Received {
            request,
            metadata: metadata.clone(),
        });
    };
    // Nothing is sent before the client subscribes.
    match incoming.message().await {
        Ok(Some(r)) => record(r),
        _ => return,
    }
    let mut snapshots = state.snapshot.subscribe();
    let mut sent_version: Option<String> = None;
    loop {
        let current = snapshots.borrow_and_update().clone();
        if let Some(s) = current
            && sent_version.as_deref() != Some(s.version.as_str())
        {
            let nonce = {
                let mut n = state.nonce.lock().unwrap();
                *n += 1;
                n.to_string()
            };
            let response = DiscoveryResponse {
                version_info: s.version.clone(),
                resources: s
                    .resources
                    .iter()
                    .map(|r| Any {
                        type_url: TYPE_URL.into(),
                        value: r.encode_to_vec(),
                    })
                    .collect(),
                type_url: TYPE_URL.into(),
                nonce: nonce.clone(),
                ..DiscoveryResponse::default()
            };
            state.log.lock().unwrap().sent.push(Sent {
                version: s.version.clone(),
                nonce,
            });
            if tx.unbounded_send(response).is_err() {
                return;
            }
            sent_version = Some(s.version);
        }
        tokio::select! {
            m = incoming.message() => match m {
                Ok(Some(r)) => record(r),
                _ => return,
            },
            c = snapshots.changed() => if c.is_err() { return },
        }
    }
}
