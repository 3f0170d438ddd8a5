-- sliding_log (code 3): the timestamps of admitted hits; U = entries in (now - W, +inf).
-- State: ZSET, score = ts (ms), member '%d:%d:%s' = (now, entry number, per-call nonce) so
-- entries of one ms never collide (never build members by concatenating numbers).
-- Expired entries are removed by the writes (ZREMRANGEBYSCORE); a read-only call only counts.
-- TTL = reset + slack (the newest entry's expiry). Config caps R (SLIDING_LOG_MAX) and rejects
-- overdraft, so a charge adds at most 10 000 members.
-- Loaded into l.u = the count and l.cut = now - W. l.reset caches sl_reset: it is only asked
-- for once the state is final (after the write, if any).
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "sliding_log".
local sl_load, sl_write, sl_reset, sl_retry
if USES[3] then
  sl_load = function(l, now)
    l.cut = now - l.W
    l.u = redis.call('ZCOUNT', l.key, string.format('(%d', l.cut), '+inf')
  end

  -- ms until the newest entry leaves the window, 0 when empty.
  sl_reset = function(l, now)
    local r = l.reset
    if r == nil then
      r = 0
      if l.u > 0 then
        local ts = tonumber(redis.call('ZRANGE', l.key, '-1', '-1', 'WITHSCORES')[2])
        if ts ~= nil then
          r = ts + l.W - now
        end
      end
      l.reset = r
    end
    return r
  end

  -- Prune the expired entries, then add n entries at now (charge) or remove the n newest
  -- (refund); save.
  sl_write = function(l, now, n, slack, nonce, charge)
    local call, fmt = redis.call, string.format
    call('ZREMRANGEBYSCORE', l.key, '-inf', fmt('%d', l.cut))
    if charge then
      local ts = fmt('%d', now)
      if n == 1 then
        call('ZADD', l.key, ts, fmt('%d:1:%s', now, nonce))
      else
        local args, e = {}, 1
        while e <= n do
          args[#args + 1] = ts
          args[#args + 1] = fmt('%d:%d:%s', now, e, nonce)
          if #args >= 1000 or e == n then -- ZADD batches of 500
            call('ZADD', l.key, unpack(args))
            args = {}
          end
          e = e + 1
        end
      end
      l.u = l.u + n
    else
      local k = math.min(n, l.u)
      if k > 0 then
        call('ZPOPMAX', l.key, fmt('%d', k))
      end
      l.u = l.u - k
    end
    if l.u <= 0 then
      call('DEL', l.key)
      return
    end
    call('PEXPIRE', l.key, fmt('%d', math.max(1, sl_reset(l, now) + slack)))
  end

  -- The k-th oldest live entry (k = U + n - C) has to leave the window first.
  sl_retry = function(l, now, n)
    if n > l.C then
      return -1
    end
    local fmt = string.format
    local k = math.max(1, l.u + n - l.C)
    local e = redis.call('ZRANGEBYSCORE', l.key, fmt('(%d', l.cut), '+inf', 'WITHSCORES',
      'LIMIT', fmt('%d', k - 1), '1')
    local ts = tonumber(e[2])
    if ts == nil then
      return 0
    end
    return ts + l.W - now
  end
end
