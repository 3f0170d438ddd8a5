-- sliding_log (code 3): the timestamps of admitted hits; U = entries in (now - W, +inf).
-- State: ZSET, score = ts (ms), member '%d:%d:%s' = (now, entry number, per-call nonce) so
-- entries of one ms never collide (R5: never build members by concatenating numbers).
-- Expired entries are removed by the writes (ZREMRANGEBYSCORE); a read-only call only counts.
-- TTL = reset + slack (the newest entry's expiry). Config caps R (SLIDING_LOG_MAX) and rejects
-- overdraft, so a charge adds at most 10 000 members.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "sliding_log".

local SL_ZADD_BATCH = 500

-- Remove the entries at or before now - W (only ever called by a write).
local function sl_prune(st)
  if not st.pruned then
    redis.call('ZREMRANGEBYSCORE', st.key, '-inf', I(st.cut))
    st.pruned = true
  end
end

ALGO[3] = {
  load = function(key, p, now)
    local cut = now - p.W
    local u = tonumber(redis.call('ZCOUNT', key, '(' .. I(cut), '+inf')) or 0
    return { key = key, cut = cut, u = u, used = u, nonce = ARGV[5] }
  end,
  fits = function(st, p, n)
    return st.u + n <= p.C
  end,
  charge = function(st, p, n, now)
    sl_prune(st)
    local args, e = {}, 1
    while e <= n do
      args[#args + 1] = I(now)
      args[#args + 1] = fmt('%d:%d:%s', now, e, st.nonce)
      if #args >= 2 * SL_ZADD_BATCH or e == n then
        redis.call('ZADD', st.key, unpack(args))
        args = {}
      end
      e = e + 1
    end
    st.u = st.u + n
  end,
  -- Remove the n newest entries.
  refund = function(st, p, n, now)
    sl_prune(st)
    local k = min(n, st.u)
    if k > 0 then
      redis.call('ZPOPMAX', st.key, I(k))
    end
    st.u = st.u - k
  end,
  save = function(st, p, now, slack)
    if st.u <= 0 then
      redis.call('DEL', st.key)
      return
    end
    pexpire(st.key, ALGO[3].reset(st, p, now) + slack)
  end,
  remaining = function(st, p)
    return max(0, p.C - st.u)
  end,
  reset = function(st, p, now)
    if st.u <= 0 then
      return 0
    end
    local newest = redis.call('ZRANGE', st.key, '-1', '-1', 'WITHSCORES')
    local ts = tonumber(newest[2])
    if ts == nil then
      return 0
    end
    return ts + p.W - now
  end,
  -- The k-th oldest live entry (k = U + n - C) has to leave the window first.
  retry = function(st, p, n, now)
    if n > p.C then
      return -1
    end
    local k = st.u + n - p.C
    if k < 1 then
      k = 1
    end
    local e = redis.call('ZRANGEBYSCORE', st.key, '(' .. I(st.cut), '+inf', 'WITHSCORES', 'LIMIT',
      I(k - 1), '1')
    local ts = tonumber(e[2])
    if ts == nil then
      return 0
    end
    return ts + p.W - now
  end,
}
