-- leaky_bucket (LEAKY_BUCKET): level in scaled units (one request = W units, leaks R units/ms).
-- State: string 'l:ts:x' ('%d:%d:%d': level, last update ms, expiry ms); an empty bucket is
-- no key. x = now + reset at the write: missing once x <= now (see token_bucket.lua for why).
-- TTL = time to empty + slack. Loaded into l.u (the level), l.ts, and l.lag = ts - now > 0
-- only after the clock went backwards: nothing leaks before ts, so it is added to reset and
-- retry (gcra: always 0). Decisions and report: main.lua, as for every bucket.
-- KEYS/ARGV/return: see header.lua; semantics: docs/explanation/algorithms.md "leaky_bucket".
local lb_load, lb_save
if USES[LEAKY_BUCKET] then
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
    -- The strings are cached on l (sa, sb, sc -> sv; st -> sts): the fresh keys of one rule
    -- in a call all write the same ones.
    local fmt = string.format
    local a, b, c = l.u, l.ts, now + reset
    if l.sa ~= a or l.sb ~= b or l.sc ~= c then
      l.sa, l.sb, l.sc, l.sv = a, b, c, fmt('%d:%d:%d', a, b, c)
    end
    local t = math.max(1, reset + slack)
    if l.st ~= t then
      l.st, l.sts = t, fmt('%d', t)
    end
    redis.call('SET', l.key, l.sv, 'PX', l.sts)
  end
end
