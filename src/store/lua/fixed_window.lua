-- fixed_window (FIXED_WINDOW): count per epoch-aligned window of W ms, or per calendar period
-- (l.cal: the period holding now is [cal[2 + q], cal[3 + q]), q = cal[7], header.lua).
-- State: a hash whose one field is the window start and its value the count (both '%d').
-- TTL = window end - now + slack, set when the window's field is created (with Redis TIME
-- that is the expiry every later write would set; in local time mode, where the two clocks
-- may drift apart, every charge sets it again). Loaded into l.ws, l.we (its end) and l.u = c;
-- reset_ms = retry_ms = l.we - now (main.lua). An empty state is no key at all.
-- KEYS/ARGV/return: see header.lua; semantics: docs/explanation/algorithms.md "fixed_window".
--
-- Why a hash: a hit is one HINCRBY on the field of its window, the window start in the
-- field's name, so the count is exact at the window boundary whichever clock decides it
-- (Redis judges a key's expiry at the time the script started, not at TIME; a count alone
-- in a string cannot say which window it belongs to). The field is new exactly when HINCRBY
-- answers n: then (the window's first hit on the key) the key gets its TTL, and whatever
-- else it holds is resolved: an earlier window's field is deleted, and a later window's
-- (the clock went backwards) is charged instead (conservative). So between calls a key
-- holds one field. main.lua's fast path does this for a charged hit; the functions below
-- serve every other check (peek, refund, penalty, several limits, stop-increment): they
-- read the whole hash (HGETALL: one field, two after a window change) and write the count.
local fw_load, fw_write, fw_end
if USES[FIXED_WINDOW] then
  -- The end of the window starting at ws, a later one than the window at now (ws_now ..
  -- we_now: the clock went backwards): one window on, or for a calendar the boundary after
  -- ws, one period of the current length on when ws is none of them.
  fw_end = function(cal, ws, ws_now, we_now)
    if cal then
      for j = 2, 5 do
        if cal[j] == ws then
          return cal[j + 1]
        end
      end
    end
    return ws + (we_now - ws_now)
  end

  -- Sets l.ws, l.we, l.u; l.has: the key holds a field for l.ws; l.h: the hash as read.
  -- Caches on l for the call, for the window at now (l.cws, ending at l.cwe): its field name
  -- l.wsf and expiry l.x (xb + the TTL: xb = now with Redis TIME, where expiries are
  -- absolute, PEXPIREAT; else 0).
  -- (fw_end comes as an argument: a function of the chunk that the loader captured would
  -- be an upvalue, see "Cost" in header.lua.)
  fw_load = function(l, now, slack, xb, fw_end)
    local W, cal = l.W, l.cal
    local ws_now, we_now
    if cal then
      ws_now, we_now = cal[2 + cal[7]], cal[3 + cal[7]]
    else
      ws_now = now - now % W
      we_now = ws_now + W
    end
    if l.cws ~= ws_now then
      local fmt = string.format
      l.cws, l.cwe, l.wsf, l.x = ws_now, we_now, fmt('%d', ws_now), fmt('%d', xb + math.max(1, we_now - now + slack))
    end
    local h = redis.call('HGETALL', l.key)
    local ws, c, has = ws_now, 0, false
    for i = 1, #h, 2 do
      local f = h[i] + 0
      -- The latest window: an earlier one is empty; a later one only exists when the clock
      -- went backwards: keep it (conservative).
      if f >= ws then
        ws, c, has = f, h[i + 1] + 0, true
      end
    end
    local we = we_now
    if ws ~= ws_now then
      we = fw_end(cal, ws, ws_now, we_now)
    end
    l.ws, l.we, l.u, l.has, l.h = ws, we, c, has, h
  end

  -- Charge n (saturating at 2^53, so no u64 cost can wrap the count) or refund it; save.
  -- timed: Redis TIME is the clock; the expiry is absolute (PEXPIREAT), exactly the window's
  -- end plus slack whenever it was set, so a later write need not set it again.
  fw_write = function(l, now, n, slack, charge, timed)
    local c
    if charge then
      c = math.min(l.u + n, 9007199254740992)
    else
      c = math.max(0, l.u - n)
    end
    l.u = c
    local key = l.key
    if c <= 0 then
      redis.call('DEL', key)
      return
    end
    local fmt = string.format
    local f, x
    if l.ws == l.cws then
      f, x = l.wsf, l.x
    else
      f, x = fmt('%d', l.ws), fmt('%d', (timed and now or 0) + math.max(1, l.we - now + slack))
    end
    local expire = timed and 'PEXPIREAT' or 'PEXPIRE'
    redis.call('HSET', key, f, fmt('%d', c))
    if not l.has then
      -- A new window's field: drop any other (an earlier window's), then the TTL.
      local h = l.h
      for i = 1, #h, 2 do
        redis.call('HDEL', key, h[i])
      end
      redis.call(expire, key, x)
    elseif not timed then
      redis.call(expire, key, x)
    end
  end
end
