-- fixed_window (code 1): count per epoch-aligned window of W ms.
-- State: hash {w = window start ms, c = count}; TTL = window end - now + slack.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "fixed_window".
ALGO[1] = {
  load = function(key, p, now)
    local ws_now = now - now % p.W
    local v = redis.call('HMGET', key, 'w', 'c')
    local ws, c = tonumber(v[1]), tonumber(v[2])
    -- A later window start only exists when the clock went backwards: keep it (conservative).
    if ws == nil or c == nil or ws < ws_now then
      ws, c = ws_now, 0
    end
    return { key = key, ws = ws, c = c, used = c }
  end,
  fits = function(st, p, n)
    return st.c + n <= p.C
  end,
  -- Saturates at 2^53 so no cost (a u64 from the client) can wrap the stored count.
  charge = function(st, p, n, now)
    st.c = min(st.c + n, EXACT)
  end,
  refund = function(st, p, n, now)
    st.c = max(0, st.c - n)
  end,
  save = function(st, p, now, slack)
    if st.c <= 0 then
      redis.call('DEL', st.key)
      return
    end
    redis.call('HSET', st.key, 'w', I(st.ws), 'c', I(st.c))
    pexpire(st.key, st.ws + p.W - now + slack)
  end,
  remaining = function(st, p)
    return max(0, p.C - st.c)
  end,
  reset = function(st, p, now)
    return st.ws + p.W - now
  end,
  -- The window end even when n > C: envoyproxy/ratelimit's answer.
  retry = function(st, p, n, now)
    return st.ws + p.W - now
  end,
}
