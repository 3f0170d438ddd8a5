-- sluice: the rate-limit checks of one request (descriptors D1..Dm, each with limits
-- L1..Lk), in ONE script call. Semantics: docs/explanation/algorithms.md. This file is the first part of
-- one script composed at build time (header.lua, fixed_window.lua, sliding_window.lua,
-- runs.lua, the bucket files, main.lua), so a request whose limits use different algorithms
-- is still a single atomic EVALSHA. Each check is decided atomically and in order (a later check sees what an
-- earlier one charged, as separate calls would); the request as a whole is atomic too.
--
-- KEYS, per check, per limit, in order (all under the descriptor's hash tag; none built in Lua):
--   the state key   <prefix>{<tag>}:<code>:<window s>:<buckets>:<slot>
--   then, only for a limit with a penalty (penalty_ms > 0), its lock key (same + ':p'),
--   value lock_until ('%d' ms)
--   then, after every check's keys, one id key per identified segment (below), in order:
--   <prefix>{<tag of the segment's first check>}:id:<id>:<call>, value '1'
-- ARGV: ONE string, the call's numbers as little-endian IEEE doubles (struct.pack '<d...'):
-- binary, because every argument costs Redis an object and Lua a string, and every decimal
-- one a strtod; here a number costs one 8-byte copy. Integers up to 2^53 are exact, and a
-- cost above it rounds the same way the decimal string did. In order:
--   now_ms (-1 = read TIME)   slack_ms (added to every TTL)
--   mode: 0 each check charged by its own decision; 1 stop-increment
--       (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when any check of the call is denied, no
--       admitted check is charged; denied ones follow their own rules); 2 stop-increment
--       and the request already has a denied check elsewhere (no admitted check is charged);
--       3 dry run: decide and report, write nothing (the first phase of a stop-increment
--       request split over several calls)
--   G: the number of limit groups (the distinct limit lists of the call's checks: the
--       descriptors of one rule share theirs, so its parameters travel once per call)
--   then G groups, each: k (its number of limits), then 8 per limit: code, R, W, C, B,
--       overdraft (0/1), penalty_ms, Z; then 6 per calendar limit (Z > 0), in order
--   (R is only read for the buckets, codes from LEVEL, and B only for sliding_window: the
--   window algorithms have C = R, the others no sub-windows)
--   Z: 0 for windows aligned to the epoch (of W ms), or for a calendar window (FIXED_WINDOW
--   and SLIDING_WINDOW only; docs/explanation/algorithms.md "Calendar windows") the distance from the limit's
--   own numbers to its calendar's six, further in the group: the number of the first period
--   and the five boundaries (ms) of four consecutive periods, computed by sluice (which
--   holds the time zone database) around its own clock. The script counts in the period
--   holding its now among the first three; a now outside them (an instance and a store a
--   period or more apart) is an error.
--   S: the number of segments (0: the call is one, unidentified), then S segments, each:
--       its number of checks (they follow one another; together, every check of the call)
--       and the TTL in ms of its id key (0: no id). A segment with an id is applied at most
--       once however often it is sent: its id key is set (SET NX PX) in this script, with
--       its hits; a segment whose key is there already runs as peeks (n = 0: it reports the
--       state, charges nothing). Write-backs and the calls whose hits may be sent again
--       carry one (`Ids` of a store `Call`); merged calls keep one segment per request
--   then per check, in order: n (cost, 0 = peek), g (its group, 1..G; -g: a refund)
-- Returns a flat array of integers:
--   now_ms, then 6 per limit of every check, in order: ok (0/1), remaining, reset_ms,
--   retry_ms (-1 = none), used_before, penalized (0/1)
--
-- Rules kept throughout (docs/explanation/algorithms.md):
--   * every integer written or passed to redis.call goes through string.format('%d'): Lua's
--     tostring/concatenation would turn 1.7e15 into '1.7e+15';
--   * every TTL is a PEXPIRE/PX (or, with Redis TIME, a PEXPIREAT) with an integer >= 1, set
--     by the write that needs it, and not set again by a write that would set the same expiry;
--   * only integers are returned: every division is floored or ceiled explicitly.
--
-- Cost (BENCHMARKS.md "Redis cost per decision"). Redis runs this whole chunk on every
-- EVALSHA: it keeps the compiled code, not what the code builds, and every argument, table,
-- closure, string and captured local is work the call (and the garbage collector) pays for.
-- So the script builds only what the call uses:
--   * a rule's parameters are parsed once per call (its group), whatever the number of its
--     descriptors; a check is two arguments;
--   * no table of algorithms: main.lua dispatches on the code, and an algorithm's functions
--     are only created when a limit uses it (USES);
--   * those functions capture no locals of the chunk (each captured local costs as much as a
--     table): they take now, n, slack as arguments and call redis.call, string.format,
--     math.* through the globals; the chunk-level code uses locals;
--   * one table per limit of a group, made once per call, holds its parameters and the
--     state of the check that runs; values cached on it (a formatted TTL or window start)
--     serve every check of the rule;
--   * main.lua is straight-line loops: a local function would be a closure, with an upvalue
--     per chunk local it reads, created on every call;
--   * the numbers arrive packed in one argument (above), unpacked by one C call.

local call, fmt = redis.call, string.format
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local KEYS, ARGV = KEYS, ARGV

-- The algorithms' codes, named as limit::Algorithm's table numbers them (a test holds this
-- line to that table: integration/architecture/algorithms.rs). Codes from LEVEL up keep a
-- scaled level (the bucket family), those below count requests.
local FIXED_WINDOW, SLIDING_WINDOW, SLIDING_LOG, TOKEN_BUCKET, LEAKY_BUCKET, GCRA = 1, 2, 3, 4, 5, 6
local LEVEL = TOKEN_BUCKET

-- A: the numbers of ARGV[1] (then the position after them).
local blob = ARGV[1]
if #ARGV ~= 1 or #blob % 8 ~= 0 or #blob < 32 then
  error({ err = 'ERR sluice: ARGV must be one string of packed doubles' })
end
local A = { struct.unpack('<' .. string.rep('d', #blob / 8), blob) }
local nargv = #blob / 8
local now, slack, mode = A[1], A[2], A[3]
-- Whether now is Redis's own clock: then an expiry that later writes keep is given as an
-- absolute time (PEXPIREAT, see EXPIRE below).
local timed = now == -1
if timed then
  -- Redis 3.2-4.x need effects replication before TIME may precede writes; on 5+ it is the
  -- default and on 7 (which defines REDIS_VERSION_NUM) the call is a no-op, so it is skipped.
  -- Guarded because some builds no longer define it.
  if redis.replicate_commands and not redis.REDIS_VERSION_NUM then
    pcall(redis.replicate_commands)
  end
  local t = call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
if now < 0 or now % 1 ~= 0 or slack < 0 or slack % 1 ~= 0
  or (mode ~= 0 and mode ~= 1 and mode ~= 2 and mode ~= 3) then
  error({ err = 'ERR sluice: now, slack or mode is invalid' })
end
-- Redis 7+ (the first to tell scripts its version) has PEXPIRE ... NX; main.lua's
-- fixed-window path asks HLEN instead on older servers. Tests force that branch on Redis 7
-- by setting V7 to false on the next line (RedisStore::new_forcing_pre_redis7).
local V7 = redis.REDIS_VERSION_NUM ~= nil
-- With Redis TIME a TTL that later writes keep (a fixed window's, the sliding log's) is set
-- as an absolute time, EXPIRE = PEXPIREAT at XB + ttl: exactly the state's end however late
-- in the script it is set (a relative PEXPIRE counts from Redis's clock at the command, which
-- may be past the TIME read). In local time mode (sluice's clock, which Redis's may not
-- match) it stays relative, set by every write.
local EXPIRE, XB = 'PEXPIRE', 0
if timed then
  EXPIRE, XB = 'PEXPIREAT', now
end

-- 2^53 (MAX_EXACT_SCALED): every stored usage saturates at or below it. The buckets use
-- L = min(2^53, 2^52 * R) (docs/explanation/algorithms.md "Lmax"), so gcra's TAT stays exact too.
local EXACT = 9007199254740992

-- The numbers, validated before anything is read or written: a malformed call is an error
-- reply that leaves no partial change behind. (x % 1 ~= 0 also rejects nan and inf.)
-- GR[2g - 1]: where group g starts in A (its k); GR[2g]: keys per check of group g (k plus
-- one per penalty); presized for one group. USES[code]: some limit uses the algorithm (one
-- slot per code: a code without one is unknown). A
-- bucket with R = 0 is inert: no state, capacity 0 (only peeks pass), never charged;
-- penalty locks still apply. nl: the number of limits of all checks.
local G = A[4]
if G < 0 or G % 1 ~= 0 then
  error({ err = 'ERR sluice: the group count is invalid' })
end
-- CAL[pos]: the calendar whose six numbers follow A[pos] (false while none): { first, b0,
-- b1, b2, b3, b4, q }, q (0-2) the period holding now: [b_q, b_q+1) is CAL[pos][2 + q] ..
-- CAL[pos][3 + q].
local GR, USES, CAL = { 0, 0 }, { false, false, false, false, false, false }, false
local a = 5
for g = 1, G do
  local k = A[a]
  if k == nil or k < 0 or k % 1 ~= 0 or a + 8 * k > nargv then
    error({ err = 'ERR sluice: the limit count of a group is invalid' })
  end
  local nk, ncal = k, 0
  for i = 1, k do
    local z = A[a + 8 * i]
    if z ~= 0 then
      ncal = ncal + 1
    end
  end
  local gend = a + 8 * k + 6 * ncal
  if gend > nargv then
    error({ err = 'ERR sluice: the limit count of a group is invalid' })
  end
  for i = 1, k do
    local b = a + 8 * (i - 1)
    local code, R, W, C, B, od, pen = A[b + 1], A[b + 2], A[b + 3], A[b + 4], A[b + 5], A[b + 6], A[b + 7]
    local z = A[b + 8]
    if z ~= 0 then
      -- A calendar: its six numbers within the group, after the limits' own.
      local c = b + z
      if (code ~= FIXED_WINDOW and code ~= SLIDING_WINDOW) or z % 1 ~= 0 or c < a + 8 * k or c + 6 > gend then
        error({ err = fmt('ERR sluice: invalid calendar for limit %d', i) })
      end
      local t = { A[c + 1], A[c + 2], A[c + 3], A[c + 4], A[c + 5], A[c + 6], false }
      local ok = t[1] >= 0 and t[1] % 1 == 0 and t[2] >= 0
      for j = 2, 6 do
        ok = ok and t[j] % 1 == 0 and (j == 2 or t[j] > t[j - 1])
      end
      if not ok then
        error({ err = fmt('ERR sluice: invalid calendar for limit %d', i) })
      end
      for q = 0, 2 do
        if t[2 + q] <= now and now < t[3 + q] then
          t[7] = q
        end
      end
      if not t[7] then
        error({ err = 'ERR sluice: the store clock is outside the calendar periods sent (the instance clock is a period or more away)' })
      end
      CAL = CAL or {}
      CAL[c] = t
    end
    if USES[code] == nil then
      error({ err = fmt('ERR sluice: unknown algorithm code %s', tostring(code)) })
    end
    -- The config guarantees these (docs/explanation/algorithms.md "Preconditions"); checked again because
    -- a violation would divide by zero or lose exactness. Cs bounds only the buckets' scaled
    -- arithmetic (Cs <= L, and L <= 2^53): the window algorithms never use Cs, and any C*W is
    -- legal for them. A sliding log keeps C <= SLIDING_LOG_MAX = 10000 and no overdraft.
    local bad = W < 1 or W % 1 ~= 0 or C < 0 or C % 1 ~= 0 or pen < 0 or pen % 1 ~= 0
      or (od ~= 0 and od ~= 1)
    if code == SLIDING_WINDOW then
      bad = bad or B < 1 or B % 1 ~= 0
    elseif code == SLIDING_LOG then
      bad = bad or od == 1 or C > 10000
    elseif code >= LEVEL then
      bad = bad or R < 0 or R % 1 ~= 0 or (R > 0 and C * W > min(EXACT, 4503599627370496 * R))
    end
    if bad then
      error({ err = fmt('ERR sluice: invalid parameters for limit %d', i) })
    end
    if pen > 0 then
      nk = nk + 1
    end
    USES[code] = true
  end
  GR[2 * g - 1], GR[2 * g] = a, nk
  a = gend + 1
end
-- The segments: S, then (checks, ttl) pairs from SEG.
local S = A[a]
if S == nil or S < 0 or S % 1 ~= 0 or a + 2 * S > nargv then
  error({ err = 'ERR sluice: the segment count is invalid' })
end
local SEG = a + 1
a = a + 1 + 2 * S
-- The checks: (n, g) pairs.
local first, kx, nc, nl = a, 0, 0, 0
while a <= nargv do
  local n, g = A[a], A[a + 1]
  if g == nil then
    error({ err = 'ERR sluice: a check needs n and its group' })
  end
  if g < 0 then
    g = -g
  end
  local nk = g >= 1 and g <= G and g % 1 == 0 and GR[2 * g]
  if n < 0 or n % 1 ~= 0 or not nk then
    error({ err = 'ERR sluice: n or the group of a check is invalid' })
  end
  kx = kx + nk
  nc = nc + 1
  nl = nl + A[GR[2 * g - 1]]
  a = a + 2
end
-- The segments cover the checks exactly; nid: how many have an id key (after the state keys).
local nid = 0
if S > 0 then
  local sc = 0
  for s = SEG, SEG + 2 * S - 2, 2 do
    local c, ttl = A[s], A[s + 1]
    if c < 1 or c % 1 ~= 0 or ttl < 0 or ttl % 1 ~= 0 then
      error({ err = 'ERR sluice: a segment is invalid' })
    end
    sc = sc + c
    if ttl > 0 then
      nid = nid + 1
    end
  end
  if sc ~= nc or (nid > 0 and mode == 3) then
    error({ err = 'ERR sluice: the segments do not match the checks' })
  end
end
if kx + nid ~= #KEYS then
  error({ err = 'ERR sluice: KEYS and ARGV do not match the limits' })
end
-- Every check is valid: record the ids. DUP[i]: check i belongs to a segment applied before,
-- so it only reports (false while no segment is).
local DUP = false
if nid > 0 then
  local ki, ci = kx, 0
  for s = SEG, SEG + 2 * S - 2, 2 do
    local c, ttl = A[s], A[s + 1]
    if ttl > 0 then
      ki = ki + 1
      if not call('SET', KEYS[ki], '1', 'NX', 'PX', fmt('%d', ttl)) then
        DUP = DUP or {}
        for i = ci + 1, ci + c do
          DUP[i] = true
        end
      end
    end
    ci = ci + c
  end
end

-- The pool: one table per limit position of the general path (main.lua), made when a call
-- first needs it, holding while a check runs a limit's parameters (code, W, C, R, B, od,
-- pen, Cs = C*W, L = Lmax, cal = its CAL entry or false: copied from A when the limit at
-- that position changes, b = where they start), key, lock and state: u = usage (requests
-- for the counting algorithms, a scaled level in [0, L] for the buckets), lag and ts
-- (buckets), used = used_before,
-- ok, left (penalty time left, or false), locked, and the algorithm's own fields, including
-- what it caches for the call while the limit stays the same (the checks of one rule follow
-- one another). Every field a check sets is created with the table (main.lua), or fits in
-- the room those leave: a table that must grow costs a rehash.
local POOL = {}
-- Each algorithm file below defines, when USES its code, functions of a limit `l` that load
-- its state (reads only: set l.u, and for the buckets l.lag and l.ts, brought to now) and
-- write a charge or refund of n. Everything that only needs u is main.lua's.
