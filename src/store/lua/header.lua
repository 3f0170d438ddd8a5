-- sluice: one rate-limit check (a descriptor and its limits L1..Lk), atomically.
-- Semantics: docs/algorithms.md. This file is the first part of ONE script composed at
-- build time (header.lua, the six algorithm files, main.lua), so a check whose limits use
-- different algorithms is still a single atomic EVALSHA.
--
-- KEYS (2 per limit, all under the descriptor's hash tag, none built in Lua):
--   KEYS[2i-1]  state key of limit i   <prefix>{<tag>}:<code>:<window s>:<buckets>:<slot>
--   KEYS[2i]    penalty lock of limit i (same key + ':p'), value lock_until ('%d' ms)
-- ARGV:
--   [1] now_ms ('' = read TIME)   [2] n (cost, 0 = peek)   [3] refund (0/1)
--   [4] slack_ms (added to every TTL)   [5] nonce (unique per call; sliding_log members)
--   then 7 per limit i, from 6 + 7(i-1): code, R, W, C, B, overdraft (0/1), penalty_ms
--   (R is only read for the buckets, codes 4-6, and B only for sliding_window: the window
--   algorithms have C = R, the others no sub-windows)
-- Returns a flat array of integers:
--   now_ms, then 6 per limit: ok (0/1), remaining, reset_ms, retry_ms (-1 = none),
--   used_before, penalized (0/1)
--
-- Rules kept throughout (docs/algorithms.md):
--   * every integer written or passed to redis.call goes through string.format('%d'): Lua's
--     tostring/concatenation would turn 1.7e15 into '1.7e+15';
--   * every TTL is a PEXPIRE/PX with an integer >= 1, set by the write that needs it;
--   * only integers are returned: every division is floored or ceiled explicitly.
--
-- Cost. Redis runs this whole chunk on every EVALSHA: it keeps the compiled code, not what
-- the code builds, and every table, closure, string and captured local is an allocation the
-- call (and the garbage collector) pays for. So the script builds only what the call uses:
--   * no table of algorithms: main.lua dispatches on the code, and an algorithm's functions
--     are only created when a limit uses it (USES);
--   * those functions capture no locals of the chunk (each captured local costs as much as a
--     table): they take now, n, slack as arguments and call redis.call, string.format,
--     math.* through the globals; the chunk-level code uses locals;
--   * one table per limit holds its parameters and state (LIMITS);
--   * numeric arguments are coerced with `+ 0` (one conversion; tonumber does two), which
--     raises Lua's arithmetic error on a non-numeric argument.

local call, fmt = redis.call, string.format
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local KEYS, ARGV = KEYS, ARGV

-- The arguments, validated before anything is read or written: a malformed call is an error
-- reply that leaves no partial change behind. (x % 1 ~= 0 also rejects nan and inf.)
local nk = #KEYS / 2
if nk % 1 ~= 0 or #ARGV ~= 5 + 7 * nk then
  error({ err = 'ERR sluice: expected 2 KEYS and 7 ARGV per limit' })
end

local now = ARGV[1]
if now == '' then
  -- Redis 3.2-4.x need effects replication before TIME may precede writes; on 5+ it is the
  -- default and on 7 (which defines REDIS_VERSION_NUM) the call is a no-op, so it is skipped.
  -- Guarded because some builds no longer define it.
  if redis.replicate_commands and not redis.REDIS_VERSION_NUM then
    pcall(redis.replicate_commands)
  end
  local t = call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
else
  now = now + 0
end
local n, refund, slack, nonce = ARGV[2] + 0, ARGV[3], ARGV[4] + 0, ARGV[5]
if now < 0 or now % 1 ~= 0 or n < 0 or n % 1 ~= 0 or slack < 0 or slack % 1 ~= 0
  or (refund ~= '0' and refund ~= '1') then
  error({ err = 'ERR sluice: now, n, refund or slack is not a non-negative integer' })
end
refund = refund == '1'

-- 2^53 (MAX_EXACT_SCALED): every stored usage saturates at or below it. The buckets use
-- L = min(2^53, 2^52 * R) (docs/algorithms.md "Lmax"), so gcra's TAT stays exact too.
local EXACT = 9007199254740992

-- LIMITS[i]: limit i's parameters (code, key, W, C, R, od, pen, Cs = C*W, L = Lmax) and
-- state: u = usage (requests for the window algorithms 1-3, a scaled level in [0, L] for
-- the buckets 4-6), lag and ts (buckets), used = used_before, ok, and the algorithm's own
-- fields. A bucket with R = 0 is inert: no state, capacity 0 (only peeks pass), never
-- charged; penalty locks still apply. USES[code]: some limit uses the algorithm.
local LIMITS, USES = { false }, { false, false, false, false, false, false } -- presized
for i = 1, nk do
  local base = 5 + 7 * (i - 1)
  local code, W, C = ARGV[base + 1] + 0, ARGV[base + 3] + 0, ARGV[base + 4] + 0
  local od, pen = ARGV[base + 6], ARGV[base + 7]
  pen = pen == '0' and 0 or pen + 0
  if code < 1 or code > 6 or code % 1 ~= 0 then
    error({ err = fmt('ERR sluice: unknown algorithm code %s', ARGV[base + 1]) })
  end
  local l = {
    code = code, key = KEYS[2 * i - 1], W = W, C = C, R = 0, od = od == '1', pen = pen,
    Cs = 0, L = 0, u = 0, lag = 0, ts = 0, used = 0, ok = false,
  }
  -- The config guarantees these (docs/algorithms.md "Preconditions"); checked again because
  -- a violation would divide by zero, lose exactness, or (a sliding log above
  -- SLIDING_LOG_MAX = 10000 entries, or with overdraft) let one call add unbounded ZSET
  -- members and block the server. Cs bounds only the buckets' scaled arithmetic (Cs <= L,
  -- and L <= 2^53): the window algorithms never use Cs, and any C*W is legal for them.
  local bad = W < 1 or W % 1 ~= 0 or C < 0 or C % 1 ~= 0 or pen < 0 or pen % 1 ~= 0
    or (od ~= '0' and od ~= '1')
  if code == 2 then
    local B = ARGV[base + 5] + 0
    l.B = B
    bad = bad or B < 1 or B % 1 ~= 0
  elseif code == 3 then
    bad = bad or l.od or C > 10000
  elseif code >= 4 then
    local R = ARGV[base + 2] + 0
    l.R, l.Cs, l.L = R, C * W, min(EXACT, 4503599627370496 * R)
    bad = bad or R < 0 or R % 1 ~= 0 or (R > 0 and l.Cs > l.L)
  end
  if bad then
    error({ err = fmt('ERR sluice: invalid parameters for limit %d', i) })
  end
  LIMITS[i] = l
  USES[code] = true
end

-- Each algorithm file below defines, when USES its code, functions of a limit `l` that load
-- its state (reads only: set l.u, and for the buckets l.lag and l.ts, brought to now) and
-- write a charge or refund of n. Everything that only needs u is main.lua's.
