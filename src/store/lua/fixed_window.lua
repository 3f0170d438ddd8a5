-- fixed_window (code 1): count per epoch-aligned window of W ms.
-- State: string 'ws:c' ('%d:%d': window start ms, count), TTL = window end - now + slack.
-- Loaded into l.ws and l.u = c; reset_ms = retry_ms = l.ws + W - now (main.lua).
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "fixed_window".
local fw_load, fw_write
if USES[1] then
  fw_load = function(l, now)
    local ws_now = now - now % l.W
    local ws, c
    local v = redis.call('GET', l.key)
    if v then
      ws, c = string.match(v, '^(%d+):(%d+)$')
    end
    if ws == nil then
      ws, c = ws_now, 0
    else
      ws, c = ws + 0, c + 0
      -- A later window start only exists when the clock went backwards: keep it
      -- (conservative).
      if ws < ws_now then
        ws, c = ws_now, 0
      end
    end
    l.ws, l.u = ws, c
  end

  -- Charge n (saturating at 2^53, so no u64 cost can wrap the count) or refund it; save.
  fw_write = function(l, now, n, slack, charge)
    local c
    if charge then
      c = math.min(l.u + n, 9007199254740992)
    else
      c = math.max(0, l.u - n)
    end
    l.u = c
    if c <= 0 then
      redis.call('DEL', l.key)
      return
    end
    local fmt = string.format
    redis.call('SET', l.key, fmt('%d:%d', l.ws, c), 'PX',
      fmt('%d', math.max(1, l.ws + l.W - now + slack)))
  end
end
