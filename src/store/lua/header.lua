-- sluice: one rate-limit check (a descriptor and its limits L1..Lk), atomically.
-- Semantics: docs/algorithms.md. This file is the first part of ONE script composed at
-- build time (header.lua, the six algorithm files, main.lua), so a check whose limits use
-- different algorithms is still a single atomic EVALSHA.
--
-- KEYS (2 per limit, all under the descriptor's hash tag, none built in Lua):
--   KEYS[2i-1]  state key of limit i   <prefix>{<tag>}:<code>:<unit s>:<buckets>:<slot>
--   KEYS[2i]    penalty lock of limit i (same key + ':p'), value lock_until ('%d' ms)
-- ARGV:
--   [1] now_ms ('' = read TIME)   [2] n (cost, 0 = peek)   [3] refund (0/1)
--   [4] slack_ms (added to every TTL)   [5] nonce (unique per call; sliding_log members)
--   then 7 per limit i, from 6 + 7(i-1): code, R, W, C, B, overdraft (0/1), penalty_ms
-- Returns a flat array of integers:
--   now_ms, then 6 per limit: ok (0/1), remaining, reset_ms, retry_ms (-1 = none),
--   used_before, penalized (0/1)
--
-- Rules kept throughout (docs/algorithms.md, reference R1-R13):
--   * every integer written or passed to redis.call goes through I() ('%d'): Lua's
--     tostring/concatenation would turn 1.7e15 into '1.7e+15' (R5);
--   * every TTL is a PEXPIRE/PX with an integer >= 1, set by the write that needs it (R6, R8);
--   * only integers are returned (R4): every division is floored or ceiled explicitly.

-- Redis 3.2-4.x need effects replication before TIME may precede writes; on 5+ it is the
-- default and on 7 the call is a no-op. Guarded because some builds no longer define it.
if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local fmt = string.format
-- 2^53 (MAX_EXACT_SCALED): every stored usage saturates at or below it. The buckets use
-- p.L = min(2^53, 2^52 * R) (docs/algorithms.md "Lmax"), so gcra's TAT stays exact too.
local EXACT = 9007199254740992
local HALF_EXACT = 4503599627370496

-- The only way an integer becomes a string in this script.
local function I(x)
  return fmt('%d', x)
end

-- ceil(a / b) for integers with |a| <= 2^53, b > 0. A correctly rounded quotient of such
-- operands never lands on an integer it does not equal, so math.ceil is exact.
local function ceil_div(a, b)
  return ceil(a / b)
end

local function floor_div(a, b)
  return floor(a / b)
end

-- Set `key`'s TTL in ms, never below 1 (PEXPIRE 0 would delete, a fraction is an error).
local function pexpire(key, ttl)
  redis.call('PEXPIRE', key, I(max(1, ttl)))
end

-- Algorithm implementations, keyed by Algorithm::code(). Each entry provides:
--   load(key, p, now) -> st   read the state and bring it to now (reads only); st.used is
--                             used_before in whole requests
--   fits(st, p, n)  -> bool   U + n <= C
--   charge(st, p, n, now)     add n (may write, for the ZSET log)
--   refund(st, p, n, now)     give back n, never below empty (may write)
--   save(st, p, now, slack)   persist a charged/refunded state with its TTL, or delete it
--   remaining(st, p)          max(0, C - U) in whole requests
--   reset(st, p, now)         ms until usage is back to 0
--   retry(st, p, n, now)      ms until this hit would fit, -1 = never (n > C)
-- `p` holds the limit's parameters: code, R, W, C, B, od, pen, Cs (= C*W), key, lock.
local ALGO = {}
