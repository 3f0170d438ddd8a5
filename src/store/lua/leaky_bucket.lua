-- leaky_bucket (code 5): level in scaled units (one request = W units, leaks R units/ms).
-- State: hash {l = level, ts = last update ms, x = expiry ms}; an empty bucket is no key.
-- x = now + reset at the write: missing once x <= now (see token_bucket.lua for why).
-- TTL = time to empty + slack. lag = ts - now > 0 only after the clock went backwards:
-- nothing leaks before ts, so it is added to reset and retry (gcra: always 0).
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "leaky_bucket".

-- Shared with gcra, which makes the same decisions on the same scaled level.
local function lb_fits(st, p, n)
  return n <= p.C and st.l + n * p.W <= p.Cs
end

-- The cap only bounds overdraft: Cs <= Lmax, so it never lowers a legitimate level.
local function lb_charge(st, p, n, now)
  st.l = min(st.l + n * p.W, p.L)
end

local function lb_refund(st, p, n, now)
  st.l = max(0, st.l - n * p.W)
end

local function lb_remaining(st, p)
  return floor_div(max(0, p.Cs - st.l), p.W)
end

local function lb_reset(st, p, now)
  return st.lag + ceil_div(st.l, p.R)
end

-- (l + n*W - Cs) / R, written as level minus free space so no intermediate exceeds 2^53.
local function lb_retry(st, p, n, now)
  if n > p.C then
    return -1
  end
  return st.lag + ceil_div(st.l - (p.Cs - n * p.W), p.R)
end

ALGO[5] = {
  load = function(key, p, now)
    local v = redis.call('HMGET', key, 'l', 'ts', 'x')
    local l, ts, x = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
    local lag = 0
    if l == nil or ts == nil or (x ~= nil and x <= now) then
      l, ts = 0, now
    else
      l = min(p.L, max(0, l - max(0, now - ts) * p.R))
      lag = max(0, ts - now)
      ts = max(ts, now)
    end
    return { key = key, l = l, ts = ts, lag = lag, used = ceil_div(l, p.W) }
  end,
  fits = lb_fits,
  charge = lb_charge,
  refund = lb_refund,
  save = function(st, p, now, slack)
    if st.l <= 0 then
      redis.call('DEL', st.key)
      return
    end
    local reset = lb_reset(st, p, now)
    redis.call('HSET', st.key, 'l', I(st.l), 'ts', I(st.ts), 'x', I(now + reset))
    pexpire(st.key, reset + slack)
  end,
  remaining = lb_remaining,
  reset = lb_reset,
  retry = lb_retry,
}
