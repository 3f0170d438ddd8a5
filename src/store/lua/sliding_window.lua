-- sliding_window (code 2): B sub-windows per W; U = sum of the sub-windows overlapping the
-- trailing window (those with index >= idx(now) - B). start(i) = ceil(i*W/B) is the first
-- ms of sub-window i.
-- State: hash with one field per sub-window index ('%d' -> count) plus bookkeeping:
--   lo = lowest index possibly present, hi = highest index with a count, s = sum of counts.
-- The bookkeeping makes a call O(1) amortized: expired sub-windows are found by walking from
-- lo (each index is dropped once), never by scanning the hash. TTL = reset + slack.
-- Loaded into l.u = the sum, l.lo, l.hi, l.cur = idx(now), l.first = cur - B, l.clear (the
-- hash is stale as a whole: whatever it holds reads as 0), l.cache (counts read or changed
-- by this call, by index; the current sub-window's comes with the load) and l.drop (expired
-- indexes to delete, or false).
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "sliding_window".
local sw_load, sw_write, sw_reset, sw_retry
if USES[2] then
  -- Sub-windows with a count in [from, to], ascending, as {index, count}. Reads the range with
  -- one HMGET, or, when the range is wider than the hash (only after the clock jumped), the
  -- fields actually present with one HGETALL.
  local function sw_present(l, from, to)
    local out = {}
    if to < from then
      return out
    end
    local call, cache = redis.call, l.cache
    if not l.clear then
      local span = to - from + 1
      if span <= 4096 and span <= call('HLEN', l.key) then
        local want, idx = {}, {}
        for j = from, to do
          if cache[j] == nil then
            want[#want + 1] = string.format('%d', j)
            idx[#idx + 1] = j
          end
        end
        if #want > 0 then
          local v = call('HMGET', l.key, unpack(want))
          for m = 1, #idx do
            cache[idx[m]] = tonumber(v[m]) or 0
          end
        end
      else
        local all = call('HGETALL', l.key)
        for m = 1, #all, 2 do
          local j = tonumber(all[m]) -- nil for lo/hi/s
          if j ~= nil and j >= from and j <= to and cache[j] == nil then
            cache[j] = tonumber(all[m + 1]) or 0
          end
        end
      end
    end
    for j, c in pairs(cache) do
      if j >= from and j <= to and c > 0 then
        out[#out + 1] = { j, c }
      end
    end
    table.sort(out, function(a, b)
      return a[1] < b[1]
    end)
    return out
  end

  sw_load = function(l, now)
    local cur = math.floor(now * l.B / l.W)
    local first = cur - l.B
    local cache = {}
    l.cur, l.first, l.cache, l.drop = cur, first, cache, false
    local v = redis.call('HMGET', l.key, 'lo', 'hi', 's', string.format('%d', cur))
    local lo, hi, s = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
    if lo == nil or hi == nil or s == nil or s <= 0 or hi < first then
      -- Missing, or every sub-window is older than the trailing window: empty. Whatever the
      -- hash still holds is deleted before the next write.
      l.clear = true
      l.lo, l.hi, l.u = cur, cur, 0
      cache[cur] = 0
      return
    end
    l.clear = false
    cache[cur] = tonumber(v[4]) or 0
    if lo < first then
      -- Drop the sub-windows that left the trailing window (deleted by the write, if any).
      local drop = {}
      for _, e in ipairs(sw_present(l, lo, first - 1)) do
        s = s - e[2]
        drop[#drop + 1] = e[1]
      end
      l.drop = drop
      lo = first
    end
    l.lo, l.hi, l.u = lo, hi, math.max(0, s)
  end

  -- The newest counted sub-window leaves the trailing window at start(hi + B + 1).
  sw_reset = function(l, now)
    if l.u <= 0 then
      return 0
    end
    return math.ceil((l.hi + l.B + 1) * l.W / l.B) - now
  end

  -- Charge n (the total saturates at 2^53 so no cost can make counts or their sum inexact)
  -- or refund n, taking from the newest sub-windows first; save.
  sw_write = function(l, now, n, slack, charge)
    local call, fmt, min, max = redis.call, string.format, math.min, math.max
    local cache = l.cache
    local dirty = {} -- the sub-windows this write changed
    if charge then
      local cur = l.cur
      local add = min(n, 9007199254740992 - l.u)
      -- Saturated: nothing changes (and no empty sub-window is created).
      if add > 0 then
        cache[cur] = cache[cur] + add
        dirty[1] = cur
        l.u = l.u + add
        l.hi = max(l.hi, cur)
        l.lo = min(l.lo, cur)
      end
    elseif l.u > 0 then
      local rem = n
      local ents = sw_present(l, l.lo, l.hi)
      for m = #ents, 1, -1 do
        if rem <= 0 then
          break
        end
        local j, c = ents[m][1], ents[m][2]
        local take = min(c, rem)
        cache[j] = c - take
        dirty[#dirty + 1] = j
        l.u = l.u - take
        rem = rem - take
      end
      l.hi = l.lo
      local any = false
      for m = #ents, 1, -1 do
        if cache[ents[m][1]] > 0 then
          l.hi = ents[m][1]
          any = true
          break
        end
      end
      if not any then
        l.u = 0
      end
    end
    -- Save: empty is no key; a cleared hash is replaced as a whole.
    if l.clear or l.u <= 0 then
      call('DEL', l.key)
      if l.u <= 0 then
        return
      end
    end
    local hset = { 'lo', fmt('%d', l.lo), 'hi', fmt('%d', l.hi), 's', fmt('%d', l.u) }
    local hdel = {}
    if l.drop then
      for _, j in ipairs(l.drop) do
        hdel[#hdel + 1] = fmt('%d', j)
      end
    end
    for _, j in ipairs(dirty) do
      local c = cache[j]
      if c > 0 then
        hset[#hset + 1] = fmt('%d', j)
        hset[#hset + 1] = fmt('%d', c)
      else
        hdel[#hdel + 1] = fmt('%d', j)
      end
    end
    if hdel[1] and not l.clear then
      call('HDEL', l.key, unpack(hdel))
    end
    call('HSET', l.key, unpack(hset))
    call('PEXPIRE', l.key, fmt('%d', max(1, sw_reset(l, now) + slack)))
  end

  -- Smallest k >= 1 such that, once sub-windows cur-B .. cur-B+k-1 have left, the hit fits.
  sw_retry = function(l, now, n)
    if n > l.C then
      return -1
    end
    local ceil = math.ceil
    -- What must leave the window; U - (C - n), not U + n - C: U may be 2^53 (saturated)
    -- and U + n would round.
    local need = l.u - (l.C - n)
    if need <= 0 then
      return ceil((l.cur + 1) * l.W / l.B) - now
    end
    local acc = 0
    for _, e in ipairs(sw_present(l, l.first, l.cur)) do
      acc = acc + e[2]
      if acc >= need then
        return ceil((l.cur + e[1] - l.first + 1) * l.W / l.B) - now
      end
    end
    -- Only reachable when the clock went backwards (counts newer than cur).
    return sw_reset(l, now)
  end
end
