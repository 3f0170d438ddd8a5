//! Fuzz targets on the stable toolchain: the rule-file parser and validator, the protobuf
//! `RateLimitRequest` decoder (and the whole decision path behind it), the `/json` decoder
//! (same), and the xDS resource conversion. No cargo-fuzz/AFL (they need nightly or extra
//! tools): each target is fed its corpus (`fuzz/corpus/<target>/`), structure-aware
//! generated inputs (random rule trees, requests, resources) and byte-level mutations of
//! both, from a deterministic PRNG. What counts as a finding: a panic, an input that takes
//! over [`HANG`] (long runs only: the normal suite asserts no timing), or the process
//! growing past [`MAX_RSS_BYTES`] (unbounded allocation).
//!
//! - `cargo test --test fuzz`: the short replay of the normal suite (every corpus file plus
//!   a fixed number of generated inputs per target, fixed seed).
//! - Long run, one target at a time (time per target from `FUZZ_SECONDS`, default 60;
//!   `FUZZ_TARGET` one of rules, proto, json, xds, default all; `FUZZ_SEED` to reproduce):
//!   `FUZZ_SECONDS=600 FUZZ_TARGET=rules nice -n 19 cargo test --test fuzz -- --ignored --nocapture`
//!   (the dev profile: a release build of the whole dev-dependency tree is not worth it).
//!   Findings are written to `<target>-<hash>` files in `findings` beside `fuzz/corpus`
//!   (reproduce with `replay_file` below, or by copying the file
//!   into the corpus, then `cargo test --test fuzz`), and fail the run.

mod inputs;
mod targets;

use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use targets::Target;

/// An input slower than this is a finding in long runs.
const HANG: Duration = Duration::from_secs(2);
/// Resident memory past which the run stops as an unbounded allocation.
const MAX_RSS_BYTES: u64 = 2 << 30;
/// Generated inputs per target in the short replay.
const REPLAY_GENERATED: usize = 300;

/// xorshift64*: deterministic, fast, plenty for choosing mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(splitmix64(seed) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Byte values that tend to find bugs in parsers: boundaries and syntax characters.
const INTERESTING: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'\n', b':', b'-', b'{', b'}', b'[', b']', b'"', b'\'', b'&', b'*',
    b'!', b'#', b'|', b'>', b'%', b'@', b'\\', b' ', b'\t', b'?', b',',
];

/// Varint boundaries (protobuf lengths and tags).
const VARINTS: &[&[u8]] = &[
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
    &[0x7f],
    &[0x00],
];

/// One random byte-level edit of `data` (`others` for splicing).
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>]) {
    let len = data.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = *rng.pick(INTERESTING);
        }
        2 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            data.drain(at..at + n);
        }
        4 if len > 0 => {
            // Duplicate a range (repetition, nesting).
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(256));
            let copy = data[at..at + n].to_vec();
            let to = rng.below(len + 1);
            data.splice(to..to, copy);
        }
        5 if !others.is_empty() => {
            // Splice the tail of another input.
            let other = rng.pick(others);
            if !other.is_empty() {
                let from = rng.below(other.len());
                let at = rng.below(len + 1);
                data.truncate(at);
                data.extend_from_slice(&other[from..]);
            }
        }
        6 if len > 0 => {
            data.truncate(rng.below(len));
        }
        7 if len > 0 => {
            // A varint-ish boundary value written over the middle (protobuf lengths, tags).
            let at = rng.below(len);
            let v = *rng.pick(VARINTS);
            let end = (at + v.len()).min(len);
            data.splice(at..end, v.iter().copied());
        }
        _ => {
            let at = rng.below(len + 1);
            data.insert(at, *rng.pick(INTERESTING));
        }
    }
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn load_corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("corpus file"))
        })
        .collect()
}

/// Resident set size of this process.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

#[derive(Default)]
struct Outcome {
    runs: u64,
    accepted: u64,
    findings: Vec<String>,
    slowest: Duration,
}

/// CPU time this thread has used (`/proc/thread-self/schedstat`, nanoseconds), so that a
/// niced run on a busy machine does not take waiting for a core for a slow input; wall
/// time where it cannot be read.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

/// Run one input; a panic (or, when `timed`, a slow input: CPU time over [`HANG`]) becomes
/// a finding saved in `findings` beside `fuzz/corpus`.
fn run_one(target: &mut dyn Target, input: &[u8], timed: bool, out: &mut Outcome) {
    let started = Instant::now();
    let cpu = thread_cpu();
    let r = catch_unwind(AssertUnwindSafe(|| target.run(input)));
    let took = match (cpu, thread_cpu()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => started.elapsed(),
    };
    out.runs += 1;
    out.slowest = out.slowest.max(took);
    let problem = match r {
        Ok(true) => {
            out.accepted += 1;
            None
        }
        Ok(false) => None,
        Err(e) => Some(format!(
            "panic: {}",
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    };
    let problem = problem.or_else(|| (timed && took > HANG).then(|| format!("slow: {took:?}")));
    if let Some(p) = problem {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        input.hash(&mut h);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/findings");
        let _ = std::fs::create_dir_all(&dir);
        let file = dir.join(format!("{}-{:016x}", target.name(), h.finish()));
        let _ = std::fs::write(&file, input);
        out.findings.push(format!("{p} ({})", file.display()));
    }
}

/// Corpus, then generated and mutated inputs until `budget` (count or time) is spent.
fn fuzz(
    target: &mut dyn Target,
    seed: u64,
    count: Option<usize>,
    time: Option<Duration>,
) -> Outcome {
    let mut out = Outcome::default();
    let corpus: Vec<Vec<u8>> = load_corpus(target.name())
        .into_iter()
        .map(|c| c.1)
        .collect();
    for c in &corpus {
        run_one(target, c, time.is_some(), &mut out);
    }
    let mut rng = Rng::new(seed);
    let mut pool = corpus.clone();
    let started = Instant::now();
    let mut n = 0usize;
    loop {
        if count.is_some_and(|c| n >= c) || time.is_some_and(|t| started.elapsed() >= t) {
            break;
        }
        n += 1;
        let mut input = if pool.is_empty() || rng.chance(3) {
            target.generate(&mut rng)
        } else {
            rng.pick(&pool).clone()
        };
        // A third go in as they are (generated ones reach the validators and the decision
        // path); the rest get one to three byte-level edits.
        if !rng.chance(3) {
            for _ in 0..1 + rng.below(3) {
                mutate(&mut rng, &mut input, &pool);
            }
        }
        run_one(target, &input, time.is_some(), &mut out);
        // Keep a bounded pool of recent inputs to mutate further (no coverage feedback
        // on stable: recency and variety instead).
        if input.len() < 64 * 1024 {
            if pool.len() < 512 {
                pool.push(input);
            } else {
                let i = rng.below(pool.len());
                pool[i] = input;
            }
        }
        if n.is_multiple_of(1000) {
            let rss = rss_bytes();
            if rss > MAX_RSS_BYTES {
                out.findings
                    .push(format!("memory: {rss} bytes resident after {n} inputs"));
                break;
            }
        }
    }
    out
}

fn report(name: &str, seed: u64, out: &Outcome, took: Duration) {
    eprintln!(
        "fuzz {name}: {} inputs ({} accepted) in {took:.1?}, seed {seed}, slowest input \
         {:?} CPU, rss {} MiB, {} finding(s)",
        out.runs,
        out.accepted,
        out.slowest,
        rss_bytes() >> 20,
        out.findings.len()
    );
    for f in &out.findings {
        eprintln!("  {f}");
    }
}

/// The replay of the normal suite: every corpus file of every target, plus a fixed set of
/// generated inputs. Must find nothing.
#[test]
fn replay_corpus_and_generated_inputs() {
    let mut all = Vec::new();
    for mut target in targets::all() {
        let name = target.name();
        let corpus = load_corpus(name);
        assert!(!corpus.is_empty(), "fuzz/corpus/{name} is empty");
        let started = Instant::now();
        let out = fuzz(target.as_mut(), 20_261_126, Some(REPLAY_GENERATED), None);
        report(name, 20_261_126, &out, started.elapsed());
        all.extend(out.findings.into_iter().map(|f| format!("{name}: {f}")));
    }
    assert!(all.is_empty(), "{all:#?}");
}

/// The long run (see the module documentation).
#[test]
#[ignore = "long: FUZZ_SECONDS per target"]
fn long_run() {
    let secs: u64 = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let only = std::env::var("FUZZ_TARGET").ok();
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs())
        });
    let mut all = Vec::new();
    for mut target in targets::all() {
        let name = target.name();
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let started = Instant::now();
        let out = fuzz(target.as_mut(), seed, None, Some(Duration::from_secs(secs)));
        report(name, seed, &out, started.elapsed());
        all.extend(out.findings.into_iter().map(|f| format!("{name}: {f}")));
    }
    assert!(all.is_empty(), "{all:#?}");
}

/// Write structure-aware inputs into the corpus (how the `gen-*` files were made):
/// `FUZZ_WRITE_CORPUS=1 cargo test --test fuzz write_seed_corpus -- --ignored`.
#[test]
#[ignore = "writes fuzz/corpus"]
fn write_seed_corpus() {
    if std::env::var_os("FUZZ_WRITE_CORPUS").is_none() {
        return;
    }
    let mut rng = Rng::new(7);
    for mut target in targets::all() {
        let dir = corpus_dir(target.name());
        std::fs::create_dir_all(&dir).expect("corpus dir");
        let mut written = 0;
        while written < 16 {
            let input = target.generate(&mut rng);
            // Keep the ones the target accepts: they carry the structure.
            if target.run(&input) || rng.chance(4) {
                std::fs::write(dir.join(format!("gen-{written:02}")), &input).expect("write");
                written += 1;
            }
        }
    }
}

/// Run one saved input (a finding) and say how it went:
/// `FUZZ_FILE=<findings file> cargo test --test fuzz replay_file -- --ignored --nocapture`
/// (the target is the file name's prefix).
#[test]
#[ignore = "needs FUZZ_FILE"]
fn replay_file() {
    let Some(path) = std::env::var_os("FUZZ_FILE").map(PathBuf::from) else {
        return;
    };
    let input = std::fs::read(&path).expect("FUZZ_FILE");
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut target = targets::all()
        .into_iter()
        .find(|t| name.starts_with(t.name()))
        .expect("a target named by the file's prefix");
    let started = Instant::now();
    let accepted = target.run(&input);
    eprintln!("{name}: accepted {accepted} in {:?}", started.elapsed());
}
