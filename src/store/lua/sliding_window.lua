-- sliding_window (code 2): B sub-windows per W; U = sum of the sub-windows overlapping the
-- trailing window (those with index >= idx(now) - B).
-- State: hash with one field per sub-window index ('%d' -> count) plus bookkeeping:
--   lo = lowest index possibly present, hi = highest index with a count, s = sum of counts.
-- The bookkeeping makes a call O(1) amortized: expired sub-windows are found by walking from
-- lo (each index is dropped once), never by scanning the hash. TTL = reset + slack.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "sliding_window".

-- start(i) = ceil(i*W/B): the first ms of sub-window i.
local function sw_start(p, i)
  return ceil_div(i * p.W, p.B)
end

-- Count of sub-window j as this call sees it (cache holds reads and this call's changes;
-- a cleared state ignores whatever the hash still holds).
local function sw_get(st, j)
  local c = st.cache[j]
  if c == nil then
    c = 0
    if not st.clear then
      c = tonumber(redis.call('HGET', st.key, I(j))) or 0
    end
    st.cache[j] = c
  end
  return c
end

-- Sub-windows with a count in [from, to], ascending, as {index, count}. Reads the range with
-- one HMGET, or, when the range is wider than the hash (only after the clock jumped), the
-- fields actually present with one HGETALL.
local function sw_present(st, from, to)
  local out = {}
  if to < from then
    return out
  end
  if not st.clear then
    local span = to - from + 1
    if span <= 4096 and span <= redis.call('HLEN', st.key) then
      local want, idx = {}, {}
      for j = from, to do
        if st.cache[j] == nil then
          want[#want + 1] = I(j)
          idx[#idx + 1] = j
        end
      end
      if #want > 0 then
        local v = redis.call('HMGET', st.key, unpack(want))
        for m = 1, #idx do
          st.cache[idx[m]] = tonumber(v[m]) or 0
        end
      end
    else
      local all = redis.call('HGETALL', st.key)
      for m = 1, #all, 2 do
        local j = tonumber(all[m]) -- nil for lo/hi/s
        if j ~= nil and j >= from and j <= to and st.cache[j] == nil then
          st.cache[j] = tonumber(all[m + 1]) or 0
        end
      end
    end
  end
  for j, c in pairs(st.cache) do
    if j >= from and j <= to and c > 0 then
      out[#out + 1] = { j, c }
    end
  end
  table.sort(out, function(a, b)
    return a[1] < b[1]
  end)
  return out
end

ALGO[2] = {
  load = function(key, p, now)
    local cur = floor_div(now * p.B, p.W)
    local first = cur - p.B
    local st = { key = key, cur = cur, first = first, cache = {}, dirty = {}, drop = {} }
    local v = redis.call('HMGET', key, 'lo', 'hi', 's')
    local lo, hi, s = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
    if lo == nil or hi == nil or s == nil or s <= 0 or hi < first then
      -- Missing, or every sub-window is older than the trailing window: empty. Whatever the
      -- hash still holds is deleted before the next write.
      st.clear = true
      st.lo, st.hi, st.sum = cur, cur, 0
    else
      st.clear = false
      if lo < first then
        -- Drop the sub-windows that left the trailing window (deleted by save, if any).
        for _, e in ipairs(sw_present(st, lo, first - 1)) do
          s = s - e[2]
          st.drop[#st.drop + 1] = e[1]
        end
        lo = first
      end
      st.lo, st.hi, st.sum = lo, hi, max(0, s)
    end
    st.used = st.sum
    return st
  end,
  fits = function(st, p, n)
    return st.sum + n <= p.C
  end,
  -- The total saturates at 2^53 so no cost can make counts or their sum inexact.
  charge = function(st, p, n, now)
    local cur = st.cur
    local add = min(n, EXACT - st.sum)
    if add <= 0 then
      return -- saturated: nothing changes (and no empty sub-window is created)
    end
    st.cache[cur] = sw_get(st, cur) + add
    st.dirty[cur] = true
    st.sum = st.sum + add
    st.hi = max(st.hi, cur)
    st.lo = min(st.lo, cur)
  end,
  -- Take n from the newest sub-windows first; emptied ones are deleted by save.
  refund = function(st, p, n, now)
    if st.sum <= 0 then
      return
    end
    local rem = n
    local ents = sw_present(st, st.lo, st.hi)
    for m = #ents, 1, -1 do
      if rem <= 0 then
        break
      end
      local j, c = ents[m][1], ents[m][2]
      local take = min(c, rem)
      st.cache[j] = c - take
      st.dirty[j] = true
      st.sum = st.sum - take
      rem = rem - take
    end
    st.hi = st.lo
    local any = false
    for m = #ents, 1, -1 do
      if st.cache[ents[m][1]] > 0 then
        st.hi = ents[m][1]
        any = true
        break
      end
    end
    if not any then
      st.sum = 0
    end
  end,
  save = function(st, p, now, slack)
    if st.clear or st.sum <= 0 then
      redis.call('DEL', st.key)
      if st.sum <= 0 then
        return
      end
    end
    local hdel = {}
    for _, j in ipairs(st.drop) do
      hdel[#hdel + 1] = I(j)
    end
    local hset = { 'lo', I(st.lo), 'hi', I(st.hi), 's', I(st.sum) }
    for j in pairs(st.dirty) do
      local c = st.cache[j]
      if c > 0 then
        hset[#hset + 1] = I(j)
        hset[#hset + 1] = I(c)
      else
        hdel[#hdel + 1] = I(j)
      end
    end
    if #hdel > 0 and not st.clear then
      redis.call('HDEL', st.key, unpack(hdel))
    end
    redis.call('HSET', st.key, unpack(hset))
    pexpire(st.key, ALGO[2].reset(st, p, now) + slack)
  end,
  remaining = function(st, p)
    return max(0, p.C - st.sum)
  end,
  -- The newest counted sub-window leaves the trailing window at start(hi + B + 1).
  reset = function(st, p, now)
    if st.sum <= 0 then
      return 0
    end
    return sw_start(p, st.hi + p.B + 1) - now
  end,
  -- Smallest k >= 1 such that, once sub-windows cur-B .. cur-B+k-1 have left, the hit fits.
  retry = function(st, p, n, now)
    if n > p.C then
      return -1
    end
    -- What must leave the window; U - (C - n), not U + n - C: U may be 2^53 (saturated)
    -- and U + n would round.
    local need = st.sum - (p.C - n)
    if need <= 0 then
      return sw_start(p, st.cur + 1) - now
    end
    local acc = 0
    for _, e in ipairs(sw_present(st, st.first, st.cur)) do
      acc = acc + e[2]
      if acc >= need then
        return sw_start(p, st.cur + e[1] - st.first + 1) - now
      end
    end
    -- Only reachable when the clock went backwards (counts newer than cur).
    return ALGO[2].reset(st, p, now)
  end,
}
