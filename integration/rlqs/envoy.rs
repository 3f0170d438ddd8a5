//! A fake Envoy for the RLQS tests: envoy-types' generated client on one stream, and
//! readers of the assignments it gets.

use std::collections::HashMap;
use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::Strategy;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tokio::sync::mpsc;
use tonic::Streaming;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;

use crate::support::sluice::Sluice;

/// How long a test waits for a message it expects.
pub(crate) const WITHIN: Duration = Duration::from_secs(15);

/// One Envoy: a stream of reports and the server's answers.
pub(crate) struct Envoy {
    tx: Option<mpsc::Sender<RateLimitQuotaUsageReports>>,
    rx: Streaming<RateLimitQuotaResponse>,
    domain: String,
    first: bool,
}

pub(crate) fn bucket(entries: &[(&str, &str)]) -> BucketId {
    BucketId {
        bucket: entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>(),
    }
}

pub(crate) fn usage(b: &BucketId, allowed: u64, denied: u64, elapsed_ms: u64) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(b.clone()),
        time_elapsed: Some(PbDuration {
            seconds: (elapsed_ms / 1000) as i64,
            nanos: ((elapsed_ms % 1000) * 1_000_000) as i32,
        }),
        num_requests_allowed: allowed,
        num_requests_denied: denied,
    }
}

impl Envoy {
    pub(crate) async fn connect(s: &Sluice, domain: &str) -> Envoy {
        Envoy::on(s.channel().await, domain).await
    }

    /// An Envoy on a channel of the test's making (TLS).
    pub(crate) async fn on(channel: tonic::transport::Channel, domain: &str) -> Envoy {
        let mut client = RateLimitQuotaServiceClient::new(channel);
        let (tx, rx) = mpsc::channel(8);
        let rx = client
            .stream_rate_limit_quotas(ReceiverStream::new(rx))
            .await
            .expect("open the RLQS stream")
            .into_inner();
        Envoy {
            tx: Some(tx),
            rx,
            domain: domain.to_owned(),
            first: true,
        }
    }

    /// Send one report message (the domain on the first one only, as Envoy does).
    pub(crate) async fn send(&mut self, usages: Vec<BucketQuotaUsage>) {
        let domain = if self.first {
            self.domain.clone()
        } else {
            String::new()
        };
        self.first = false;
        self.send_raw(RateLimitQuotaUsageReports {
            domain,
            bucket_quota_usages: usages,
        })
        .await;
    }

    pub(crate) async fn send_raw(&mut self, m: RateLimitQuotaUsageReports) {
        let tx = self.tx.as_ref().expect("stream open");
        tx.send(m).await.expect("send a report");
    }

    /// The next message from the server.
    pub(crate) async fn next(&mut self) -> Result<Option<RateLimitQuotaResponse>, tonic::Status> {
        tokio::time::timeout(WITHIN, self.rx.message())
            .await
            .expect("an answer from the server in time")
    }

    /// The next response's action for `b`.
    pub(crate) async fn action_for(&mut self, b: &BucketId) -> BucketAction {
        loop {
            let r = self.next().await.expect("no error").expect("stream open");
            if let Some(a) = r
                .bucket_action
                .into_iter()
                .find(|a| a.bucket_id.as_ref() == Some(b))
            {
                return a;
            }
        }
    }

    /// Report `b` and return the assignment that comes back.
    pub(crate) async fn report(&mut self, b: &BucketId, allowed: u64, denied: u64) -> BucketAction {
        self.send(vec![usage(b, allowed, denied, 1000)]).await;
        self.action_for(b).await
    }

    /// End the stream from the client's side, as an Envoy that goes away.
    pub(crate) fn close(&mut self) {
        self.tx = None;
    }
}

pub(crate) enum Got {
    /// `tokens` per `fill_ms`, in a bucket of `burst`.
    Tokens {
        tokens: u32,
        burst: u32,
        fill_ms: u64,
    },
    Allow,
    Deny,
    Abandon,
}

/// The assignment of an action and its TTL in ms.
pub(crate) fn got(a: &BucketAction) -> (Got, Option<u64>) {
    match a.bucket_action.as_ref().expect("an action") {
        Action::AbandonAction(_) => (Got::Abandon, None),
        Action::QuotaAssignmentAction(q) => {
            let ttl = q
                .assignment_time_to_live
                .map(|d| d.seconds as u64 * 1000 + d.nanos as u64 / 1_000_000);
            let s = q
                .rate_limit_strategy
                .as_ref()
                .and_then(|s| s.strategy.as_ref());
            let g = match s.expect("a strategy") {
                Strategy::BlanketRule(0) => Got::Allow,
                Strategy::BlanketRule(_) => Got::Deny,
                Strategy::TokenBucket(t) => {
                    let f = t.fill_interval.expect("fill interval");
                    Got::Tokens {
                        tokens: t.tokens_per_fill.expect("tokens per fill").value,
                        burst: t.max_tokens,
                        fill_ms: f.seconds as u64 * 1000 + f.nanos as u64 / 1_000_000,
                    }
                }
                other => panic!("unexpected strategy {other:?}"),
            };
            (g, ttl)
        }
    }
}

pub(crate) fn tokens(a: &BucketAction) -> u32 {
    match got(a).0 {
        Got::Tokens { tokens, .. } => tokens,
        _ => panic!("not a token bucket: {a:?}"),
    }
}
