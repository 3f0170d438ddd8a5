-- gcra (GCRA): the theoretical arrival time TAT = a + b/R ms (0 <= b < R), one string:
-- 'a' when b = 0, else 'a:b:R' (the R it was written with, so a changed rate rescales b).
-- Loaded as the scaled level l.u = (TAT - now) * R: every decision is leaky_bucket's on that
-- level (main.lua), with lag 0: the TAT is absolute, a clock gone backwards just sees a
-- higher level. TTL = TAT - now (rounded up) + slack; an empty state is no key at all.
-- KEYS/ARGV/return: see header.lua; semantics: docs/explanation/algorithms.md "gcra".
local gcra_load, gcra_save
if USES[GCRA] then
  gcra_load = function(l, now)
    local v = redis.call('GET', l.key)
    if not v then
      return
    end
    local R = l.R
    local a, b, r = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
    if a then
      a, b, r = a + 0, b + 0, r + 0
    else
      a, b, r = tonumber(v), 0, R
    end
    if a ~= nil and r > 0 then
      if r ~= R and b > 0 then
        -- The same double operations as the native code: ceil((b * R) / R').
        b = math.ceil(b * R / r)
        a = a + math.floor(b / R)
        b = b % R
      end
      l.u = math.min(l.L, math.max(0, (a - now) * R + b))
    end
  end

  -- Save a charged or refunded level; `reset` is ceil(level / R) (main.lua).
  gcra_save = function(l, now, slack, reset)
    local lv, R = l.u, l.R
    if lv <= 0 then
      redis.call('DEL', l.key)
      return
    end
    -- The strings are cached on l (sa, sb -> sv; st -> sts): the fresh keys of one rule in a
    -- call all write the same ones.
    local fmt = string.format
    local a, b = now + math.floor(lv / R), lv % R
    if l.sa ~= a or l.sb ~= b then
      l.sa, l.sb = a, b
      if b == 0 then
        l.sv = fmt('%d', a)
      else
        l.sv = fmt('%d:%d:%d', a, b, R)
      end
    end
    local t = math.max(1, reset + slack)
    if l.st ~= t then
      l.st, l.sts = t, fmt('%d', t)
    end
    redis.call('SET', l.key, l.sv, 'PX', l.sts)
  end
end
