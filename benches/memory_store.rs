//! Micro-benchmark of the memory store: time per call of `MemoryStore::run_at` for
//! `fixed_window` and `gcra`, with 1 and 4 checks per call (throughput is per check), on a
//! hot key and spread over 100k keys. The clock advances 1 ms per call, as a busy server's
//! would, so windows roll and buckets drain; limits are high enough to always admit.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sluice::limit::{Algorithm, Check, LimitResult, LimitSpec, ManualClock, StateTag, Unit};
use sluice::store::memory::MemoryStore;

const T0: u64 = 1_700_000_040_000;

fn limit(algorithm: Algorithm) -> LimitSpec {
    LimitSpec::new(algorithm, 1_000_000_000, Unit::Second)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory_store");
    for algorithm in [Algorithm::FixedWindow, Algorithm::Gcra] {
        let limits = [limit(algorithm)];
        for checks_per_call in [1u64, 4] {
            for keys in [1u64, 100_000] {
                let store = MemoryStore::new(Arc::new(ManualClock::new(T0)));
                let tags: Vec<StateTag> = (0..keys * checks_per_call)
                    .map(|i| StateTag::compute("bench", [("key", i.to_string().as_str())]))
                    .collect();
                let mut out: Vec<LimitResult> = Vec::with_capacity(4);
                let (mut now, mut next) = (T0, 0usize);
                group.throughput(Throughput::Elements(checks_per_call));
                let id = format!(
                    "{}/{checks_per_call}_per_call/{keys}_keys",
                    algorithm.name()
                );
                group.bench_function(BenchmarkId::from_parameter(id), |b| {
                    b.iter(|| {
                        let n = checks_per_call as usize;
                        let batch = &tags[next..next + n];
                        next = (next + n) % tags.len();
                        let checks: [Check<'_>; 4] = std::array::from_fn(|i| Check {
                            tag: batch[i % n],
                            limits: &limits,
                            cost: 1,
                            refund: false,
                        });
                        now += 1;
                        out.clear();
                        store.run_at(black_box(&checks[..n]), now, &mut out);
                        black_box(&out);
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
