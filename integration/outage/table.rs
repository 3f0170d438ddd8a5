//! BENCHMARKS.md's outage table, from one run: admitted versus held after a 5 s freeze and
//! a 3 s kill (restarted from the append-only file, and empty). Exact counts, not timings,
//! so a shared machine serves:
//!
//! `cargo test --release --test integration -- --ignored --nocapture outage::table`

use std::time::Duration;

use super::kill::{kill_aof, kill_empty};
use super::stall::freeze;
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "prints BENCHMARKS.md's outage table; run on demand"]
async fn outage_table() {
    avoid_boundary(86_400, 600).await;
    let rows = [
        (
            "Redis frozen (SIGSTOP) 5 s, resumed",
            freeze(Duration::from_secs(5)).await,
        ),
        (
            "Redis killed 3 s, restarted from its AOF (`appendfsync always`)",
            kill_aof(Duration::from_secs(3)).await,
        ),
        (
            "Redis killed 3 s, restarted empty (hits from the kill on)",
            kill_empty(Duration::from_secs(3)).await,
        ),
    ];
    println!(
        "| scenario | calls | admitted (strict / batched) | Redis holds (strict / batched) | store errors counted |"
    );
    println!("|---|---|---|---|---|");
    for (name, o) in &rows {
        println!(
            "| {name} | {} | {} / {} | {} / {} | {} |",
            o.calls, o.admitted.0, o.admitted.1, o.held.0, o.held.1, o.store_errors
        );
    }
    for (_, o) in &rows {
        assert_eq!(o.held, o.admitted);
    }
}
