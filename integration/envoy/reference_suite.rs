//! envoyproxy/ratelimit's acceptance scenarios, passed by sluice through a real Envoy:
//! written here after envoyproxy/ratelimit's integration-test at commit f2fb157, whose eight
//! `integration-test/scripts/*.sh` are its acceptance test. Each script is a scenario of its
//! own, in a file named after it: the same HTTP requests in the same order, with the same
//! headers and paths, and the same expectations. Facts about what they test, written as our
//! code; none of their files is in this tree (the comments name one as
//! `envoyproxy/ratelimit:<path in their repository>`).
//!
//! Each scenario runs on a stack of its own (`stack`), as their compose file
//! (`integration-test/docker-compose-integration-test.yml`) sets one up:
//! - a real Redis;
//! - sluice, the binary, run as `ratelimit` with only the environment their compose file
//!   gives their service (the list is in `stack`), compose host names and fixed ports made
//!   loopback and free ones;
//! - a real Envoy with our bootstrap (`proxy`): the HTTP `ratelimit` filter with their
//!   proxy's settings (`domain: rl`, over `envoy_grpc`), the routes and `rate_limits` actions
//!   their proxy has for the paths the scenarios call, and their mock upstream's two services
//!   (listeners of the same Envoy here, not a second one);
//! - the rules their example config has for what the scenarios reach (`rules`);
//! - a statsd exporter (`support::statsd_exporter`, which says why it is a stand-in) with a
//!   mapping of ours for the one name a scenario reads.
//!
//! Stricter than their scripts, which mostly look at the exit status of the last call
//! before each `if`, and several of whose checks cannot fail whatever the service answers
//! (each scenario's doc comment says which): every response's status (and body, where the
//! script greps it) is asserted as envoyproxy/ratelimit answers it; and at the end, the
//! proxy's own count of its checks' outcomes (`cluster.<route's cluster>.ratelimit.ok`,
//! `.over_limit`, `.error`, `.failure_mode_allowed`) must be what envoyproxy/ratelimit
//! answers to the scenario's requests, with no failed check, so a request Envoy let through
//! because sluice did not answer cannot pass for one sluice allowed
//! (`simple_get::a_pass_on_failed_checks_fails`). The counts follow from their semantics:
//! shadow mode answers OK, quota mode is over only when every quota descriptor is, a
//! `hits_addend: 0` check is over once the count exceeds the limit, a report at stream end
//! is not a check.
//!
//! Changed for a loaded test machine, not for sluice:
//! - the filter waits 2 s for sluice, where their proxy leaves Envoy's default of 20 ms for
//!   the whole check: on two busy cores a check can take longer, and Envoy then lets the
//!   request through (`failure_mode_deny: false`), failing a scenario that expects a 429;
//! - where a script sleeps 5 s for sluice's stats to reach the exporter, the scenario polls
//!   the exporter until they do (sluice flushes every 10 s, as theirs does by default);
//! - where one request's usage is reported at stream end and the next request's check
//!   depends on it, the scenario waits until sluice has counted the report (their scripts
//!   rely on curl being slower than the report);
//! - their limits count per minute of the wall clock (Redis's `TIME`), so calls that
//!   straddle a minute's end see their counts restart midway (a chance their own run takes):
//!   a scenario starts with at least 15 s of its minute ahead.
//!
//! Their 60 s sleeps are kept: three scenarios need a real minute to pass on Redis's clock,
//! which sluice, run as their compose file runs theirs, reads. The scenarios run in
//! parallel, so the suite waits that minute about once.
//!
//! No difference between sluice and envoyproxy/ratelimit shows in these scenarios.

mod proxy;
mod rules;
mod stack;

mod multiservice_tokenquota;
mod quota;
mod replaces;
mod simple_get;
mod token_quota;
mod trigger_ratelimit;
mod trigger_shadow_mode_key;
mod value_included_in_stats_key_when_unspecified;
