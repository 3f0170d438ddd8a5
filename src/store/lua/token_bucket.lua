-- token_bucket (TOKEN_BUCKET): tokens in scaled units (one request = W units, refill R units/ms).
-- State: string 't:ts:x' ('%d:%d:%d': tokens, last update ms, expiry ms); a full bucket is
-- no key. x = now + reset at the write: a state is missing once x <= now, as if its TTL had
-- run out with slack 0 (what the memory store does). The TTL alone would keep it `slack`
-- longer, and after a lowered rate or a raised burst the state at x is not yet equivalent
-- to missing. TTL = time to full + slack (the key vanishes when it would read as full).
-- Loaded as the level l.u = Cs - tokens (main.lua decides and reports on it as for every
-- bucket), l.ts, and l.lag = ts - now > 0 only after the clock went backwards: nothing
-- refills before ts, so it is added to reset and retry.
-- KEYS/ARGV/return: see header.lua; semantics: docs/explanation/algorithms.md "token_bucket".
local tb_load, tb_save
if USES[TOKEN_BUCKET] then
  tb_load = function(l, now)
    local v = redis.call('GET', l.key)
    local t, ts, x
    if v then
      t, ts, x = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
    end
    if t == nil or x + 0 <= now then
      l.u, l.ts = 0, now
      return
    end
    -- A changed burst keeps the available tokens, clamped to the new capacity.
    local max, Cs = math.max, l.Cs
    t, ts = t + 0, ts + 0
    t = max(Cs - l.L, math.min(Cs, t + max(0, now - ts) * l.R))
    l.u, l.lag, l.ts = Cs - t, max(0, ts - now), max(ts, now)
  end

  -- Save a charged or refunded level; `reset` is its time to full (main.lua).
  tb_save = function(l, now, slack, reset)
    if l.u <= 0 then
      redis.call('DEL', l.key)
      return
    end
    -- The strings are cached on l (sa, sb, sc -> sv; st -> sts): the fresh keys of one rule
    -- in a call all write the same ones.
    local fmt = string.format
    local a, b, c = l.Cs - l.u, l.ts, now + reset
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
