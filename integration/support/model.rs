//! A literal transcription of `docs/explanation/algorithms.md` in exact integer arithmetic (`i128`), used
//! as the oracle of the differential test: the Lua must agree with the document, not just
//! with itself. Deliberately naive (whole-state copies, linear scans): clarity over speed.
//! Not the memory store (that one lives in `src/store/memory/`); a second, independent
//! reading of the same document. This file: the algorithms; `model_store.rs`: the check
//! protocol over them, as a `Store`.

#![allow(dead_code)]

use std::collections::BTreeMap;

use sluice::limit::{Algorithm, LimitSpec};

const EXACT: i128 = 1 << 53;

pub(crate) fn ceil_div(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

pub(crate) fn floor_div(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

#[derive(Clone, Debug)]
pub(crate) enum St {
    Fixed {
        ws: i128,
        c: i128,
    },
    Sliding {
        counts: BTreeMap<i128, i128>,
    },
    Log {
        ts: Vec<i128>,
    },
    /// `x`: the expiry (`now + reset_ms` at the write); missing once `x ≤ now`.
    Token {
        t: i128,
        ts: i128,
        x: i128,
    },
    Leaky {
        l: i128,
        ts: i128,
        x: i128,
    },
    Gcra {
        a: i128,
        b: i128,
        r: i128,
    },
}

pub(crate) struct P {
    alg: Algorithm,
    r: i128,
    w: i128,
    c: i128,
    b: i128,
    cs: i128,
    /// `Lmax`: the most scaled usage a bucket holds.
    lmax: i128,
}

impl P {
    pub(crate) fn of(s: &LimitSpec) -> P {
        let w = i128::from(s.window_ms());
        let c = i128::from(s.capacity());
        P {
            alg: s.algorithm,
            r: i128::from(s.requests_per_unit),
            w,
            c,
            b: i128::from(s.buckets),
            cs: c * w,
            lmax: EXACT.min((1 << 52) * i128::from(s.requests_per_unit)),
        }
    }

    fn start(&self, i: i128) -> i128 {
        ceil_div(i * self.w, self.b)
    }
}

/// Working state of one limit during a check: the usage representation every algorithm
/// reduces to, plus what its report needs.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    Fixed {
        ws: i128,
        c: i128,
    },
    Sliding {
        cur: i128,
        counts: BTreeMap<i128, i128>,
    },
    Log {
        ts: Vec<i128>,
    },
    Token {
        t: i128,
        ts: i128,
        lag: i128,
    },
    Level {
        l: i128,
        ts: i128,
        lag: i128,
    },
    /// A bucket algorithm with `R = 0`: no state, capacity 0.
    Inert,
}

pub(crate) fn load(p: &P, st: Option<&St>, now: i128) -> Work {
    match p.alg {
        Algorithm::FixedWindow => {
            let ws_now = now - now.rem_euclid(p.w);
            match st {
                Some(St::Fixed { ws, c }) if *ws >= ws_now => Work::Fixed { ws: *ws, c: *c },
                _ => Work::Fixed { ws: ws_now, c: 0 },
            }
        }
        Algorithm::SlidingWindow => {
            let cur = floor_div(now * p.b, p.w);
            let mut counts = match st {
                Some(St::Sliding { counts }) => counts.clone(),
                _ => BTreeMap::new(),
            };
            counts.retain(|j, _| *j >= cur - p.b);
            Work::Sliding { cur, counts }
        }
        Algorithm::SlidingLog => {
            let mut ts = match st {
                Some(St::Log { ts }) => ts.clone(),
                _ => Vec::new(),
            };
            ts.retain(|t| *t > now - p.w);
            Work::Log { ts }
        }
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra if p.r == 0 => {
            Work::Inert
        }
        Algorithm::TokenBucket => match st {
            Some(St::Token { t, ts, x }) if *x > now => Work::Token {
                t: (*t + (now - *ts).max(0) * p.r).min(p.cs).max(p.cs - p.lmax),
                ts: (*ts).max(now),
                lag: (*ts - now).max(0),
            },
            _ => Work::Token {
                t: p.cs,
                ts: now,
                lag: 0,
            },
        },
        Algorithm::LeakyBucket => match st {
            Some(St::Leaky { l, ts, x }) if *x > now => Work::Level {
                l: (*l - (now - *ts).max(0) * p.r).max(0).min(p.lmax),
                ts: (*ts).max(now),
                lag: (*ts - now).max(0),
            },
            _ => Work::Level {
                l: 0,
                ts: now,
                lag: 0,
            },
        },
        Algorithm::Gcra => {
            let l = match st {
                Some(St::Gcra { a, b, r }) => {
                    let (mut a, mut b) = (*a, *b);
                    if *r != p.r && b > 0 {
                        b = ((b as f64) * (p.r as f64) / (*r as f64)).ceil() as i128;
                        a += b / p.r;
                        b %= p.r;
                    }
                    ((a - now) * p.r + b).max(0).min(p.lmax)
                }
                _ => 0,
            };
            Work::Level { l, ts: now, lag: 0 }
        }
    }
}

/// `U` in scaled units for buckets, in requests otherwise.
pub(crate) fn usage(w: &Work, p: &P) -> i128 {
    match w {
        Work::Fixed { c, .. } => *c,
        Work::Sliding { counts, .. } => counts.values().sum(),
        Work::Log { ts } => ts.len() as i128,
        Work::Token { t, .. } => p.cs - *t,
        Work::Level { l, .. } => *l,
        Work::Inert => 0,
    }
}

pub(crate) fn used_before(w: &Work, p: &P) -> i128 {
    match w {
        Work::Token { .. } | Work::Level { .. } => ceil_div(usage(w, p), p.w),
        _ => usage(w, p),
    }
}

pub(crate) fn fits(w: &Work, p: &P, n: i128) -> bool {
    match w {
        Work::Token { t, .. } => n <= p.c && n * p.w <= *t,
        Work::Level { l, .. } => n <= p.c && *l + n * p.w <= p.cs,
        Work::Inert => n == 0,
        _ => usage(w, p) + n <= p.c,
    }
}

pub(crate) fn charge(w: &mut Work, p: &P, n: i128, now: i128) {
    match w {
        Work::Fixed { c, .. } => *c = (*c + n).min(EXACT),
        Work::Sliding { cur, counts } => {
            let add = n.min(EXACT - counts.values().sum::<i128>());
            if add > 0 {
                // Counted in the newest sub-window when the clock went backwards.
                let at = counts.keys().next_back().map_or(*cur, |&j| j.max(*cur));
                *counts.entry(at).or_insert(0) += add;
            }
        }
        Work::Log { ts } => {
            // Stamped with the newest timestamp when the clock went backwards.
            let at = ts.last().map_or(now, |&newest| newest.max(now));
            ts.extend(std::iter::repeat_n(at, n as usize));
        }
        Work::Token { t, .. } => *t = (*t - n * p.w).max(p.cs - p.lmax),
        Work::Level { l, .. } => *l = (*l + n * p.w).min(p.lmax),
        Work::Inert => {}
    }
}

pub(crate) fn refund(w: &mut Work, p: &P, n: i128) {
    match w {
        Work::Fixed { c, .. } => *c = (*c - n).max(0),
        Work::Sliding { counts, .. } => {
            let mut rem = n;
            // At most 64 sub-windows, newest first.
            let keys: Vec<i128> = counts.keys().rev().take(64).copied().collect();
            for j in keys {
                if rem == 0 {
                    break;
                }
                let c = counts[&j];
                let take = c.min(rem);
                rem -= take;
                if c == take {
                    counts.remove(&j);
                } else {
                    counts.insert(j, c - take);
                }
            }
        }
        Work::Log { ts } => {
            // The n newest entries, from at most 64 distinct timestamps.
            let mut rem = n;
            let mut runs = 0;
            while rem > 0 && runs < sluice::limit::SLIDING_LOG_REFUND_RUNS {
                let Some(&newest) = ts.last() else { break };
                runs += 1;
                while rem > 0 && ts.last() == Some(&newest) {
                    ts.pop();
                    rem -= 1;
                }
            }
        }
        Work::Token { t, .. } => *t = (*t + n * p.w).min(p.cs),
        Work::Level { l, .. } => *l = (*l - n * p.w).max(0),
        Work::Inert => {}
    }
}

pub(crate) fn save(w: &Work, p: &P, now: i128) -> Option<St> {
    match w {
        Work::Fixed { ws, c } => (*c > 0).then_some(St::Fixed { ws: *ws, c: *c }),
        Work::Sliding { counts, .. } => (!counts.is_empty()).then(|| St::Sliding {
            counts: counts.clone(),
        }),
        Work::Log { ts } => (!ts.is_empty()).then(|| St::Log { ts: ts.clone() }),
        Work::Token { t, ts, .. } => (*t < p.cs).then(|| St::Token {
            t: *t,
            ts: *ts,
            x: now + reset(w, p, now),
        }),
        Work::Inert => None,
        Work::Level { l, ts, .. } => (*l > 0).then(|| match p.alg {
            Algorithm::Gcra => St::Gcra {
                a: now + l / p.r,
                b: l % p.r,
                r: p.r,
            },
            // A `Work::Level` is only a leaky bucket's or a gcra's.
            Algorithm::LeakyBucket
            | Algorithm::FixedWindow
            | Algorithm::SlidingWindow
            | Algorithm::SlidingLog
            | Algorithm::TokenBucket => St::Leaky {
                l: *l,
                ts: *ts,
                x: now + reset(w, p, now),
            },
        }),
    }
}

pub(crate) fn remaining(w: &Work, p: &P) -> i128 {
    match w {
        Work::Token { t, .. } => floor_div((*t).max(0), p.w),
        Work::Level { l, .. } => floor_div((p.cs - *l).max(0), p.w),
        Work::Inert => 0,
        _ => (p.c - usage(w, p)).max(0),
    }
}

pub(crate) fn reset(w: &Work, p: &P, now: i128) -> i128 {
    match w {
        Work::Fixed { ws, .. } => *ws + p.w - now,
        Work::Sliding { counts, .. } => match counts.keys().next_back() {
            None => 0,
            Some(hi) => p.start(*hi + p.b + 1) - now,
        },
        Work::Log { ts } => ts.last().map_or(0, |newest| newest + p.w - now),
        Work::Token { t, lag, .. } => lag + ceil_div(p.cs - *t, p.r),
        Work::Level { l, lag, .. } => lag + ceil_div(*l, p.r),
        Work::Inert => 0,
    }
}

pub(crate) fn retry(w: &Work, p: &P, n: i128, now: i128) -> Option<i128> {
    if let Work::Fixed { ws, .. } = w {
        return Some(*ws + p.w - now);
    }
    if n > p.c || matches!(w, Work::Inert) {
        return None;
    }
    Some(match w {
        Work::Fixed { .. } | Work::Inert => return None,
        Work::Sliding { cur, counts } => {
            let u: i128 = counts.values().sum();
            let mut dropped = 0;
            let mut found = None;
            for k in 1..=p.b + 1 {
                dropped += counts.get(&(cur - p.b + k - 1)).copied().unwrap_or(0);
                if u - dropped + n <= p.c {
                    found = Some(p.start(cur + k) - now);
                    break;
                }
            }
            found.unwrap_or_else(|| reset(w, p, now))
        }
        Work::Log { ts } => {
            let k = ts.len() as i128 + n - p.c;
            ts[(k - 1) as usize] + p.w - now
        }
        Work::Token { t, lag, .. } => lag + ceil_div(n * p.w - *t, p.r),
        Work::Level { l, lag, .. } => lag + ceil_div(*l + n * p.w - p.cs, p.r),
    })
}
