-- leaky_bucket (code 5): level in scaled units (one request = W units, leaks R units/ms).
-- State: string 'l:ts:x' ('%d:%d:%d': level, last update ms, expiry ms); an empty bucket is
-- no key. x = now + reset at the write: missing once x <= now (see token_bucket.lua for why).
-- TTL = time to empty + slack. Loaded into l.u (the level), l.ts, and l.lag = ts - now > 0
-- only after the clock went backwards: nothing leaks before ts, so it is added to reset and
-- retry (gcra: always 0). Decisions and report: main.lua, as for every bucket.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "leaky_bucket".
local lb_load, lb_save
if USES[5] then
  lb_load = function(l, now)
    local v = redis.call('GET', l.key)
    local lv, ts, x
    if v then
      lv, ts, x = string.match(v, '^(%d+):(%d+):(%d+)$')
    end
    if lv == nil or x + 0 <= now then
      l.u, l.ts = 0, now
      return
    end
    local max = math.max
    lv, ts = lv + 0, ts + 0
    l.u = math.min(l.L, max(0, lv - max(0, now - ts) * l.R))
    l.lag, l.ts = max(0, ts - now), max(ts, now)
  end

  -- Save a charged or refunded level; `reset` is its time to empty (main.lua).
  lb_save = function(l, now, slack, reset)
    if l.u <= 0 then
      redis.call('DEL', l.key)
      return
    end
    local fmt = string.format
    redis.call('SET', l.key, fmt('%d:%d:%d', l.u, l.ts, now + reset), 'PX',
      fmt('%d', math.max(1, reset + slack)))
  end
end
