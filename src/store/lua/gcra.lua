-- gcra (code 6): the theoretical arrival time TAT = a + b/R ms (0 <= b < R), one string:
-- 'a' when b = 0, else 'a:b:R' (the R it was written with, so a changed rate rescales b).
-- The scaled level is (TAT - now) * R, and every decision is leaky_bucket's on that level.
-- TTL = TAT - now (rounded up) + slack; an empty state is no key at all.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "gcra".
ALGO[6] = {
  load = function(key, p, now)
    local l = 0
    local v = redis.call('GET', key)
    if v then
      local sa, sb, sr = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
      local a, b, r
      if sa then
        a, b, r = tonumber(sa), tonumber(sb), tonumber(sr)
      else
        a, b, r = tonumber(v), 0, p.R
      end
      if a ~= nil and b ~= nil and r ~= nil and r > 0 then
        if r ~= p.R and b > 0 then
          -- The same double operations as the native code: ceil((b * R) / R').
          b = ceil(b * p.R / r)
          a = a + floor_div(b, p.R)
          b = b % p.R
        end
        l = min(p.L, max(0, (a - now) * p.R + b))
      end
    end
    -- lag 0: the TAT is absolute, a clock gone backwards just sees a higher level.
    return { key = key, l = l, lag = 0, used = ceil_div(l, p.W) }
  end,
  fits = lb_fits,
  charge = lb_charge,
  refund = lb_refund,
  save = function(st, p, now, slack)
    if st.l <= 0 then
      redis.call('DEL', st.key)
      return
    end
    local a = now + floor_div(st.l, p.R)
    local b = st.l % p.R
    local v
    if b == 0 then
      v = I(a)
    else
      v = fmt('%d:%d:%d', a, b, p.R)
    end
    redis.call('SET', st.key, v, 'PX', I(max(1, lb_reset(st, p, now) + slack)))
  end,
  remaining = lb_remaining,
  reset = lb_reset,
  retry = lb_retry,
}
