-- The check protocol (docs/algorithms.md "One check"), run over the algorithms above.
-- KEYS/ARGV/return: see header.lua. Bad arguments are error replies raised before the first
-- write, so a malformed call never leaves a partial change behind.

-- A bucket algorithm with R = 0 never refills: it holds no state and has capacity 0 (only
-- peeks are admitted, nothing is charged or saved). Penalty locks still apply.
local INERT = {
  load = function(key, p, now)
    return { used = 0 }
  end,
  fits = function(st, p, n)
    return n == 0
  end,
  charge = function() end,
  refund = function() end,
  save = function() end,
  remaining = function()
    return 0
  end,
  reset = function()
    return 0
  end,
  retry = function()
    return -1
  end,
}

local function fail(msg)
  error({ err = 'ERR sluice: ' .. msg })
end

local function arg_int(i)
  local x = tonumber(ARGV[i])
  if x == nil or x ~= floor(x) or x < 0 then
    fail(fmt('ARGV[%d] is not a non-negative integer', i))
  end
  return x
end

local nk = #KEYS / 2
if nk ~= floor(nk) or #ARGV ~= 5 + 7 * nk then
  fail('expected 2 KEYS and 7 ARGV per limit')
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
else
  now = arg_int(1)
end
local n = arg_int(2)
local refund = ARGV[3] == '1'
local slack = arg_int(4)

-- Parameters of every limit, validated before anything is read or written.
local P = {}
for i = 1, nk do
  local base = 5 + 7 * (i - 1)
  local p = {
    code = arg_int(base + 1),
    R = arg_int(base + 2),
    W = arg_int(base + 3),
    C = arg_int(base + 4),
    B = arg_int(base + 5),
    od = arg_int(base + 6) == 1,
    pen = arg_int(base + 7),
  }
  p.Cs = p.C * p.W
  p.L = min(EXACT, HALF_EXACT * p.R)
  p.key, p.lock = KEYS[2 * i - 1], KEYS[2 * i]
  p.algo = ALGO[p.code]
  if p.algo == nil then
    fail(fmt('unknown algorithm code %d', p.code))
  end
  if p.code >= 4 and p.R == 0 then
    p.algo = INERT
  end
  -- The config guarantees these (docs/algorithms.md "Preconditions"); checked again because
  -- a violation would divide by zero, lose exactness, or (a sliding log above
  -- SLIDING_LOG_MAX = 10000 entries, or with overdraft) let one call add unbounded ZSET
  -- members and block the server. Cs bounds only the buckets' scaled arithmetic (Cs <= L,
  -- and L <= 2^53): the window algorithms never use Cs, and any C*W is legal for them.
  if p.W < 1 or (p.code == 2 and p.B < 1)
    or (p.code >= 4 and p.R > 0 and p.Cs > p.L)
    or (p.code == 3 and (p.od or p.C > 10000)) then
    fail(fmt('invalid parameters for limit %d', i))
  end
  P[i] = p
end

-- 1. Load every limit's state, brought to now (reads only).
local S = {}
for i = 1, nk do
  S[i] = P[i].algo.load(P[i].key, P[i], now)
end

local ok, lock_left, locked = {}, {}, {}

if refund then
  -- Refund: give n back everywhere, never below empty; always allowed; penalties untouched.
  for i = 1, nk do
    local p = P[i]
    if n > 0 then
      p.algo.refund(S[i], p, n, now)
      p.algo.save(S[i], p, now, slack)
    end
    ok[i] = true
  end
else
  -- 2. Penalty: an active lock (lock_until > now) denies without touching counters.
  local any_pen = false
  for i = 1, nk do
    local p = P[i]
    if p.pen > 0 then
      local until_ms = tonumber(redis.call('GET', p.lock))
      if until_ms ~= nil and until_ms > now then
        lock_left[i] = until_ms - now
        any_pen = true
      end
    end
  end
  -- 3. Decide.
  local all_ok = true
  for i = 1, nk do
    ok[i] = lock_left[i] == nil and P[i].algo.fits(S[i], P[i], n)
    all_ok = all_ok and ok[i]
  end
  -- A peek (n = 0) and a penalized check write nothing.
  if n > 0 and not any_pen then
    -- 4. Charge: all-or-nothing, except that overdraft limits are always charged; 6. save.
    for i = 1, nk do
      local p = P[i]
      if all_ok or p.od then
        p.algo.charge(S[i], p, n, now)
        p.algo.save(S[i], p, now, slack)
      end
    end
    -- 5. Lock every denying limit that has a penalty.
    if not all_ok then
      for i = 1, nk do
        local p = P[i]
        if p.pen > 0 and not ok[i] then
          redis.call('SET', p.lock, I(now + p.pen), 'PX', I(max(1, p.pen + slack)))
          locked[i] = true
        end
      end
    end
  end
end

-- 7. Report, from the state after the charge.
local out = { now }
for i = 1, nk do
  local p, st = P[i], S[i]
  local a = p.algo
  local remaining, retry, penalized = 0, -1, 0
  if ok[i] then
    remaining = a.remaining(st, p)
  elseif lock_left[i] ~= nil then
    retry = lock_left[i]
    penalized = 1
  else
    retry = a.retry(st, p, n, now)
    -- A fresh lock extends the retry; "never" (-1) stays never.
    if locked[i] and retry >= 0 then
      retry = max(retry, p.pen)
    end
  end
  out[#out + 1] = ok[i] and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = a.reset(st, p, now)
  out[#out + 1] = retry
  out[#out + 1] = st.used
  out[#out + 1] = penalized
end
return out
