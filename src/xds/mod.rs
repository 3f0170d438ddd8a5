//! Rules from an xDS management server (`CONFIG_TYPE=GRPC_XDS_SOTW`): envoyproxy/ratelimit's
//! state-of-the-world client over `envoy.service.discovery.v3.AggregatedDiscoveryService`.
//!
//! One stream subscribes (wildcard) to `ratelimit.config.ratelimit.v3.RateLimitConfig`
//! (`proto`). Every response is the whole config: its resources are turned into the rule
//! trees a rule file's parser builds (`convert`) and validated and compiled by `config`, the
//! same code and messages as files. A valid response replaces the active config and is
//! ACKed with its version and nonce; an invalid one is NACKed (`error_detail` carries the
//! file messages, `<resource name>: <message>`), counted in `config_load_error`, and the
//! last good config keeps serving. When the stream fails or ends, the client reconnects
//! after their backoff (`XdsBackoff`) and subscribes again, announcing the last version it
//! accepted.
//!
//! Layering: `xds` uses `config` (validation), `service` (the config swap and its metrics)
//! and `settings`; it names prost and envoy-types, the protocol of this boundary.

mod channel;
mod convert;
pub mod proto;

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::core::v3::node::UserAgentVersionType;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use envoy_types::pb::google::rpc::Status;
use futures::channel::mpsc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};

use crate::config::{LoadOptions, RateLimitConfig};
use crate::service::RateLimitService;
use crate::settings::{XdsBackoff, XdsSettings};
use channel::Connector;
pub use proto::TYPE_URL;

/// gRPC status code carried in a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum XdsError {
    #[error("xDS server URL {0}")]
    Url(String),
    #[error("xDS TLS: {0}")]
    Tls(String),
    #[error("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: {0}")]
    Header(String),
    #[error("cannot connect to the xDS server {0}")]
    Connect(String),
    #[error("xDS stream: {0}")]
    Stream(String),
}

/// The resources of one response → a validated config, or every error message (what a NACK
/// carries). Public for the fuzz target (`fuzz/`), which feeds it hostile resources.
pub fn build(
    resources: &[envoy_types::pb::google::protobuf::Any],
    opts: &LoadOptions,
) -> Result<RateLimitConfig, Vec<String>> {
    let docs = convert::documents(resources).map_err(|e| vec![e.to_string()])?;
    RateLimitConfig::from_documents(docs, opts)
        .map_err(|es| es.into_iter().map(|e| e.message).collect())
}

/// Start the client. The returned receiver turns `true` once a config has loaded (the
/// server waits on it unless `FORCE_START_WITHOUT_INITIAL_CONFIG`). Errors are settings
/// mistakes (URL, TLS files, headers), found before anything connects.
pub fn spawn(
    settings: &XdsSettings,
    opts: LoadOptions,
    service: Arc<RateLimitService>,
    stop: CancellationToken,
) -> Result<watch::Receiver<bool>, XdsError> {
    let connector = Connector::new(settings)?;
    let mut headers = MetadataMap::new();
    for (k, v) in &settings.headers {
        let key = MetadataKey::from_bytes(k.as_bytes())
            .map_err(|_| XdsError::Header(format!("'{k}' is not a gRPC metadata key")))?;
        let value = MetadataValue::try_from(v.as_str())
            .map_err(|_| XdsError::Header(format!("the value of '{k}' is not ASCII text")))?;
        headers.append(key, value);
    }
    let (loaded, rx) = watch::channel(false);
    let client = Client {
        connector,
        headers,
        node: node(settings),
        backoff: settings.backoff.clone(),
        max_message_bytes: settings.max_message_bytes,
        opts,
        service,
        loaded,
        acked_version: String::new(),
    };
    tracing::info!(server = client.connector.uri(), node = %settings.node_id, "xDS config source");
    tokio::spawn(client.run(stop));
    Ok(rx)
}

fn node(s: &XdsSettings) -> Node {
    let fields = s
        .node_metadata
        .iter()
        .map(|(k, v)| {
            let value = Value {
                kind: Some(Kind::StringValue(v.clone())),
            };
            (k.clone(), value)
        })
        .collect();
    Node {
        id: s.node_id.clone(),
        metadata: Some(Struct { fields }),
        user_agent_name: "sluice".into(),
        user_agent_version_type: Some(UserAgentVersionType::UserAgentVersion(
            env!("CARGO_PKG_VERSION").into(),
        )),
        ..Node::default()
    }
}

struct Client {
    connector: Connector,
    headers: MetadataMap,
    node: Node,
    backoff: XdsBackoff,
    max_message_bytes: Option<usize>,
    opts: LoadOptions,
    service: Arc<RateLimitService>,
    loaded: watch::Sender<bool>,
    /// Version of the last config accepted, announced on every new stream.
    acked_version: String,
}

impl Client {
    /// Keep a stream open until `stop`: reconnect after each failure, with backoff.
    async fn run(mut self, stop: CancellationToken) {
        let mut attempt: u32 = 0;
        loop {
            let mut responded = false;
            let ended = tokio::select! {
                _ = stop.cancelled() => return,
                r = self.session(&mut responded) => r,
            };
            if responded {
                attempt = 0;
            }
            let delay = self
                .backoff
                .delay(attempt, crate::limit::random::random_unit());
            attempt = attempt.saturating_add(1);
            match ended {
                Ok(()) => tracing::warn!(?delay, "xDS server closed the stream; reconnecting"),
                Err(e) => tracing::warn!(error = %e, ?delay, "xDS stream failed; reconnecting"),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One stream: subscribe, then answer every response until the stream ends.
    async fn session(&mut self, responded: &mut bool) -> Result<(), XdsError> {
        let channel = self.connector.connect().await?;
        let mut ads = AggregatedDiscoveryServiceClient::new(channel);
        if let Some(n) = self.max_message_bytes {
            ads = ads.max_decoding_message_size(n);
        }
        let (tx, rx) = mpsc::unbounded();
        let subscribe = DiscoveryRequest {
            version_info: self.acked_version.clone(),
            node: Some(self.node.clone()),
            type_url: TYPE_URL.into(),
            ..DiscoveryRequest::default()
        };
        let _ = tx.unbounded_send(subscribe);
        let mut request = tonic::Request::new(rx);
        *request.metadata_mut() = self.headers.clone();
        let mut stream = ads
            .stream_aggregated_resources(request)
            .await
            .map_err(|s| XdsError::Stream(format!("{}: {}", s.code(), s.message())))?
            .into_inner();
        tracing::info!(server = self.connector.uri(), "xDS stream open");
        loop {
            let response = match stream.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(()),
                Err(s) => {
                    return Err(XdsError::Stream(format!("{}: {}", s.code(), s.message())));
                }
            };
            *responded = true;
            let reply = self.apply(&response);
            if tx.unbounded_send(reply).is_err() {
                return Err(XdsError::Stream("request stream closed".into()));
            }
        }
    }

    /// Load one response; the ACK or NACK to send back.
    fn apply(&mut self, r: &DiscoveryResponse) -> DiscoveryRequest {
        let reply = |version: &str, error: Option<String>| DiscoveryRequest {
            version_info: version.to_string(),
            type_url: r.type_url.clone(),
            response_nonce: r.nonce.clone(),
            error_detail: error.map(|message| Status {
                code: INVALID_ARGUMENT,
                message,
                details: Vec::new(),
            }),
            ..DiscoveryRequest::default()
        };
        let metrics = self.service.metrics();
        if r.type_url != TYPE_URL {
            let e = format!(
                "unexpected type {}; sluice subscribes to {TYPE_URL}",
                r.type_url
            );
            tracing::warn!(version = %r.version_info, "{e}");
            return reply(&self.acked_version, Some(e));
        }
        let built = build(&r.resources, &self.opts);
        match built {
            Ok(config) => {
                tracing::info!(
                    version = %r.version_info,
                    resources = r.resources.len(),
                    domains = config.domain_count(),
                    rules = config.rules().len(),
                    "xDS config loaded"
                );
                self.service.set_config(config);
                metrics.config_load_success.inc();
                self.acked_version = r.version_info.clone();
                self.loaded.send_replace(true);
                reply(&r.version_info, None)
            }
            Err(errors) => {
                metrics.config_load_error.inc();
                for e in &errors {
                    tracing::error!(
                        error = %e,
                        version = %r.version_info,
                        "xDS config rejected; the previous config keeps serving"
                    );
                }
                reply(&self.acked_version, Some(errors.join("\n")))
            }
        }
    }
}
