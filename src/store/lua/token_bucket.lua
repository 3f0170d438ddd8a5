-- token_bucket (code 4): tokens in scaled units (one request = W units, refill R units/ms).
-- State: hash {t = tokens, ts = last update ms, x = expiry ms}; a full bucket is no key.
-- x = now + reset at the write: a state is missing once x <= now, as if its TTL had run out
-- with slack 0 (what the memory store does). The TTL alone would keep it `slack` longer, and
-- after a lowered rate or a raised burst the state at x is not yet equivalent to missing.
-- TTL = time to full + slack (the key vanishes when it would read as full anyway).
-- lag = ts - now > 0 only after the clock went backwards: nothing refills before ts, so it
-- is added to reset and retry.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "token_bucket".
ALGO[4] = {
  load = function(key, p, now)
    local v = redis.call('HMGET', key, 't', 'ts', 'x')
    local t, ts, x = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
    local lag = 0
    if t == nil or ts == nil or (x ~= nil and x <= now) then
      t, ts = p.Cs, now
    else
      -- A changed burst keeps the available tokens, clamped to the new capacity.
      t = max(p.Cs - p.L, min(p.Cs, t + max(0, now - ts) * p.R))
      lag = max(0, ts - now)
      ts = max(ts, now)
    end
    return { key = key, t = t, ts = ts, lag = lag, used = ceil_div(p.Cs - t, p.W) }
  end,
  fits = function(st, p, n)
    return n <= p.C and n * p.W <= st.t
  end,
  -- Overdraft debt is floored so that usage Cs - t never exceeds Lmax.
  charge = function(st, p, n, now)
    st.t = max(st.t - n * p.W, p.Cs - p.L)
  end,
  refund = function(st, p, n, now)
    st.t = min(p.Cs, st.t + n * p.W)
  end,
  save = function(st, p, now, slack)
    if st.t >= p.Cs then
      redis.call('DEL', st.key)
      return
    end
    local reset = ALGO[4].reset(st, p, now)
    redis.call('HSET', st.key, 't', I(st.t), 'ts', I(st.ts), 'x', I(now + reset))
    pexpire(st.key, reset + slack)
  end,
  remaining = function(st, p)
    return floor_div(max(0, st.t), p.W)
  end,
  reset = function(st, p, now)
    return st.lag + ceil_div(p.Cs - st.t, p.R)
  end,
  -- (n*W - t) / R, written as usage minus free space so no intermediate exceeds 2^53.
  retry = function(st, p, n, now)
    if n > p.C then
      return -1
    end
    return st.lag + ceil_div((p.Cs - st.t) - (p.Cs - n * p.W), p.R)
  end,
}
