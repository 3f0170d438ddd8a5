//! The shutdown sequence: on `shutdown`, health goes NOT_SERVING at once; the listeners keep
//! answering for `shutdown_delay` (while load balancers notice), then stop accepting and
//! drain for at most `shutdown_grace`; whatever is still open after that is dropped.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::ServerError;
use crate::service::health::Health;
use crate::settings::Settings;

/// Run `servers` until they end on their own (an error) or the shutdown sequence completes.
pub(super) async fn supervise(
    servers: impl Future<Output = Result<(), ServerError>>,
    settings: &Settings,
    shutdown: &CancellationToken,
    health: &Health,
    drain: &CancellationToken,
) -> Result<(), ServerError> {
    tokio::pin!(servers);
    tokio::select! {
        r = &mut servers => return r,
        _ = shutdown.cancelled() => {}
    }
    tracing::info!(
        delay = ?settings.shutdown_delay,
        grace = ?settings.shutdown_grace,
        "shutting down"
    );
    health.shutting_down().await;
    // Keep answering while load balancers notice the failing health checks.
    tokio::select! {
        r = &mut servers => return r,
        _ = tokio::time::sleep(settings.shutdown_delay) => {}
    }
    drain.cancel();
    match tokio::time::timeout(settings.shutdown_grace, &mut servers).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!("grace period over; closing remaining connections");
            Ok(())
        }
    }
}
