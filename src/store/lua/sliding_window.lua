-- sliding_window (SLIDING_WINDOW): a count per sub-window index idx(t) = floor(t*B/W), summed over
-- the sub-windows still in the trailing window (cur - B .. cur, cur = idx(now)); a
-- sub-window i leaves at end(i) = start(i + B + 1), start(i) = ceil(i*W/B). A calendar
-- window (l.cal, header.lua) has B sub-windows per period instead: idx(t) = p*B +
-- floor((t - start(p))*B/len(p)) for the period p holding t, start(p*B + k) = start(p) +
-- ceil(k*len(p)/B) (docs/explanation/algorithms.md "Calendar windows").
-- State: ONE string, plain integers (like the buckets: a check is one GET, a charge one
-- SET ... PX; every redis.call costs Redis ~5-15k instructions, and every string the Lua
-- code makes, parses or converts costs too, so the common paths make a handful):
--   'hi:lo:base:P_hi:P_hi-1:...:P_lo' ('%d' each)
-- hi = the newest index with a count, lo = the oldest index stored, then for every index i
-- from hi down to lo (newest first) the running total P_i = base + the counts of lo..i, so
-- count(i) = P_i - P_(i-1) (P_(lo-1) = base) and the sum over i >= j is P_hi - P_(j-1): one
-- field, found by position. P_hi > P_(hi-1) (the newest has a count). The fields a charge
-- rewrites lead the string, the tail the window drops is its end, and base is the field
-- before the kept ones (the running totals keep their origin; every value stays <= 2^53:
-- a write that would pass it rewrites the string from base 0). At most B + 1 fields: a write
-- keeps only the indexes >= cur - B, and puts a new head only at cur (a clock gone
-- backwards moves cur - B below lo, and the span stays what it was).
-- Every call is bounded, whatever the cost, C or B (<= 1000):
--   * load: one GET; U = P_hi - base, or P_hi - P_(cur-B-1) when sub-windows left the
--     window (lo < cur - B: that field is found by a plain find per kept field), or 0 when
--     all did (hi < cur - B: stale);
--   * a charge adds to P_hi when hi >= cur (the same sub-window, or a clock gone backwards:
--     counted in the newest, conservatively), else puts a new head at cur (the sub-windows
--     between repeat P_hi); the rest of the string is copied as it is, cut where the window
--     dropped its tail;
--   * a refund takes from the newest sub-windows with a count, at most SW_REFUND (64), and
--     reads and rewrites only the fields down to the oldest it takes from (a run of empty
--     sub-windows as one block);
--   * retry (the sub-window whose leaving lets the hit pass) bisects the string's bytes on
--     the running totals, then counts the ':' before the field found (C, no parse).
-- TTL = reset + slack (the newest counted sub-window's end), set by the SET of every write.
-- The key is the state key plus ':s' (script.rs): earlier releases' keys (the run-length
-- ZSET runs.lua kept before this layout, the hash before that) are never read. One of those under
-- this name reads as empty and is replaced by the next write; any other type is an error.
-- Loaded into l.u, l.cur, l.lo (cur - B), l.reset (ms until hi leaves the window, 0 when
-- empty; kept up to date by sw_write), l.live (something is counted), l.stale (the key
-- holds nothing live; 1: an earlier layout's type), and when live: l.hi, l.s (the string),
-- l.slo and l.base (its lo and base), l.phi (P_hi), l.sp (where the field after P_hi
-- starts), l.cut (false, or where the dropped tail starts: the ':' before P_(cur-B-1)) and
-- l.pd (that field).
-- KEYS/ARGV/return: see header.lua; semantics: docs/explanation/algorithms.md "sliding_window".
local sw_load, sw_write, sw_retry
if USES[SLIDING_WINDOW] then
  local SW_REFUND, SW_M = 64, 9007199254740992

  -- The counts of the live sub-windows of l's string (hi down to lo or cur - B), newest
  -- first. (The rare paths: a refund, a retry, a total about to pass 2^53.)
  local function sw_counts(l)
    local s = l.s
    if l.cut then
      s = string.sub(s, 1, l.cut - 1)
    end
    local c, j, prev = {}, -3, l.cut and l.pd or l.base
    for x in string.gmatch(s, '%d+') do
      if j >= 1 then
        c[j] = c[j] - x
      end
      j = j + 1
      if j >= 1 then
        c[j] = x + 0
      end
    end
    c[j] = c[j] - prev
    return c
  end

  -- start(i) of l's sub-windows; a calendar's clamps to its first and fifth boundaries
  -- outside them (only a clock gone back by more than a period gets there).
  local function sw_start(l, i)
    local c, B = l.cal, l.B
    if not c then
      return math.ceil(i * l.W / B)
    end
    local p = math.floor(i / B)
    local k, r = i - p * B, p - c[1]
    if r < 0 then
      return c[2]
    elseif r > 4 or (r == 4 and k > 0) then
      return c[6]
    elseif k == 0 then
      return c[2 + r]
    end
    local s = c[2 + r]
    return s + math.ceil(k * (c[3 + r] - s) / B)
  end

  -- The string of counts c[h..k] (newest first, index hi down to lo), base 0.
  local function sw_encode(hi, lo, c, h, k)
    local fmt, parts, p = string.format, {}, 0
    for j = h, k do
      p = p + c[j]
    end
    for j = h, k do
      parts[j - h + 1] = fmt('%d', p)
      p = p - c[j]
    end
    return fmt('%d:%d:0:', hi, lo) .. table.concat(parts, ':')
  end

  sw_load = function(l, now)
    local cal, cur = l.cal, nil
    if cal then
      local q = cal[7]
      local s = cal[2 + q]
      cur = (cal[1] + q) * l.B + math.floor((now - s) * l.B / (cal[3 + q] - s))
    else
      cur = math.floor(now * l.B / l.W)
    end
    local lo = cur - l.B
    l.cur, l.lo, l.u, l.live, l.stale, l.reset = cur, lo, 0, false, false, 0
    local s = redis.pcall('GET', l.key)
    if not s then
      return
    end
    if type(s) == 'table' then
      local kind = redis.call('TYPE', l.key).ok
      if kind == 'zset' or kind == 'hash' then
        -- An earlier release's layout.
        l.stale = 1
        return
      end
      return error(s)
    end
    local hi, slo, base, phi, sp = string.match(s, '^(%d+):(%d+):(%d+):(%d+)()')
    l.stale = true
    if hi == nil then
      return
    end
    hi = hi + 0
    if hi < lo then
      return
    end
    phi, slo = phi + 0, slo + 0
    local u, cut = phi - base, false
    if slo < lo then
      -- Sub-windows slo .. lo - 1 left: the field after the kept ones (P_hi .. P_lo) is
      -- P_(lo-1).
      cut = sp
      for _ = lo + 1, hi do
        cut = string.find(s, ':', cut + 1, true)
        if not cut then
          return
        end
      end
      local pd = string.match(s, '^%d+', cut + 1) + 0
      u, l.pd = phi - pd, pd
    end
    l.live, l.stale = true, false
    l.hi, l.s, l.sp, l.slo, l.base, l.phi, l.cut = hi, s, sp, slo, base + 0, phi, cut
    l.u, l.reset = u, sw_start(l, hi + l.B + 1) - now
  end

  -- Charge n at the current sub-window (the total saturates at 2^53), or refund up to n from
  -- the newest sub-windows; drop the sub-windows that left; save with TTL reset + slack.
  sw_write = function(l, now, n, slack, charge, timed)
    local key, fmt = l.key, string.format
    local s, hi
    if not l.live then
      -- Nothing live: what the key holds has expired, or is an earlier release's (SET
      -- replaces either; UNLINK frees a large one off the main thread).
      if l.stale == 1 or (l.stale and not (charge and n > 0)) then
        redis.call('UNLINK', key)
      end
      if not charge or n <= 0 then
        return
      end
      local add, cur = n, l.cur
      if add > SW_M then
        add = SW_M
      end
      -- (Cached on l: the fresh keys of one rule in a call all write the same string.)
      if l.sa ~= cur or l.sb ~= add then
        l.sa, l.sb, l.sv = cur, add, fmt('%d:%d:0:%d', cur, cur, add)
      end
      s, hi = l.sv, cur
      l.live, l.u = true, add
    else
      local lo, u = l.lo, l.u
      hi = l.hi
      if charge then
        local add = math.min(n, SW_M - u)
        local pos = l.cur
        if hi >= pos or add <= 0 then
          pos = hi
        end
        local base, phi = l.base, l.phi
        if l.cut then
          base = l.pd
        else
          lo = l.slo
        end
        if add <= SW_M - phi then
          -- The fields after P_hi that stay, as they are.
          local rest
          if l.cut then
            rest = string.sub(l.s, l.sp, l.cut - 1)
          else
            rest = string.sub(l.s, l.sp)
          end
          if pos == hi then
            s = fmt('%d:%d:%d:%d', hi, lo, base, phi + add) .. rest
          else
            s = fmt('%d:%d:%d:%d', pos, lo, base, phi + add)
              .. string.rep(fmt(':%d', phi), pos - hi) .. rest
          end
        else
          -- The running totals would pass 2^53: rewritten from base 0.
          local c = sw_counts(l)
          local k = #c
          if pos == hi then
            c[1] = c[1] + add
          else
            local d = pos - hi
            for j = k, 1, -1 do
              c[j + d] = c[j]
            end
            for j = 2, d do
              c[j] = 0
            end
            c[1], k = add, k + d
          end
          s = sw_encode(pos, lo, c, 1, k)
        end
        hi, u = pos, u + add
      else
        -- Refund: from the newest sub-windows with a count, at most SW_REFUND of them.
        -- Taking from sub-window i lowers the running totals of i and of every newer index
        -- only, so only the leading fields (hi down to the oldest index taken from) are
        -- rewritten, and the rest of the string is copied as it is. The fields are read as
        -- blocks: a run of equal totals (the empty sub-windows after a counted one repeat its
        -- total; only a run's oldest field has a count) is found by doubling then halving C
        -- string compares and rewritten by one string.rep, so a refund costs per counted
        -- sub-window it reads, not per field (the SLOWLOG test's largest refund, 64 counted
        -- sub-windows behind a gap of 500 empty ones, parsed and formatted 564 fields).
        local str, find, sub, rep, byte = l.s, string.find, string.sub, string.rep, string.byte
        local min = math.min
        local stop = l.cut and l.cut - 1 or #str
        local floor = l.cut and l.pd or l.base
        -- Whether `step` copies of tok from `from` are whole fields of the kept part.
        local function copies(tok, len, from, step)
          local last = from + step * len - 1
          return last <= stop and sub(str, from, last) == rep(tok, step)
            and (last == stop or byte(str, last + 1) == 58)
        end
        -- Block b: V[b] its total, R[b] its fields, S[b] where the ':' before its first field
        -- is; NB read so far (block 1 is P_hi alone: the newest index has a count). Returns
        -- V[b], or the floor below the oldest kept field past the last block.
        local V, R, S, at, NB = { l.phi }, { 1 }, { false }, l.sp, 1
        local function block(b)
          while NB < b do
            if at > stop then
              return floor
            end
            local from = at
            local _, e, x = find(str, '^:(%d+)', from)
            local tok, len, r, step = sub(str, from, e), e - from + 1, 0, 1
            at = e + 1
            while copies(tok, len, at + r * len, step) do
              r, step = r + step, step * 2
            end
            step = step / 2
            while step >= 1 do
              if copies(tok, len, at + r * len, step) then
                r = r + step
              end
              step = step / 2
            end
            at = at + r * len
            NB = NB + 1
            V[NB], R[NB], S[NB] = x + 0, r + 1, from
          end
          return V[b]
        end
        local t, mb, rem, runs, taken = {}, 0, min(n, u), 0, 0
        while rem > 0 and runs < SW_REFUND do
          local b = mb + 1
          local v = block(b)
          if b > NB then
            break
          end
          mb = b
          local x = v - block(b + 1)
          t[b] = 0
          if x > 0 then
            local y = min(x, rem)
            t[b], rem, taken, runs = y, rem - y, taken + y, runs + 1
          end
        end
        u = u - taken
        if u <= 0 then
          redis.call('UNLINK', key)
          l.u, l.reset, l.live = 0, 0, false
          return
        end
        -- The new totals of the touched blocks: their total less what was taken at and below.
        local NV, below = {}, taken
        for b = 1, mb do
          NV[b] = V[b] - below
          below = below - t[b]
        end
        -- The new head: the oldest field of the first block whose total exceeds the next's
        -- (u > 0: one does); the fields before it are dropped.
        local h, b, drop = nil, 1, 0
        while h == nil and b <= NB do
          if (NV[b] or V[b]) > (NV[b + 1] or block(b + 1)) then
            h = b
          else
            drop = drop + R[b]
            b = b + 1
          end
        end
        if h == nil then
          return error({ err = 'ERR sluice: a sliding_window state does not add up' })
        end
        drop = drop + R[h] - 1
        local parts = { fmt(':%d', NV[h] or V[h]) }
        for j = h + 1, mb do
          parts[#parts + 1] = rep(fmt(':%d', NV[j]), R[j])
        end
        local next_block = math.max(mb, h) + 1
        if next_block <= NB then
          parts[#parts + 1] = sub(str, S[next_block], stop)
        elseif at <= stop then
          parts[#parts + 1] = sub(str, at, stop)
        end
        local base = l.base
        if l.cut then
          base = l.pd
        else
          lo = l.slo
        end
        hi = hi - drop
        s = fmt('%d:%d:%d', hi, lo, base) .. table.concat(parts)
      end
      l.u = u
    end
    -- (What sw_retry reads after a write.)
    l.s, l.hi, l.cut, l.slo = s, hi, false, false
    local reset = sw_start(l, hi + l.B + 1) - now
    l.reset = reset
    local t = reset + slack
    if t < 1 then
      t = 1
    end
    if l.st ~= t then
      l.st, l.sts = t, fmt('%d', t)
    end
    redis.call('SET', key, s, 'PX', l.sts)
  end

  -- Denied with n <= C: with U over the window, the hit passes once the sub-windows from
  -- the oldest up to and including the one where the running total, counted from the
  -- newest, first exceeds C - n have left: k = its index - (cur - B) + 1 sub-windows,
  -- retry = start(cur + k) - now, or reset when k > B + 1 (only after the clock went
  -- backwards).
  sw_retry = function(l, now, n)
    if n > l.C then
      return -1
    end
    local room = l.C - n
    if l.u - room <= 0 or not l.live then
      return sw_start(l, l.cur + 1) - now
    end
    if not l.slo then
      -- Written by this check: the string's own fields.
      local base, sp
      l.slo, base, l.phi, sp = string.match(l.s, '^%d+:(%d+):(%d+):(%d+)()')
      l.slo, l.base, l.sp = l.slo + 0, base + 0, sp
    end
    -- The counts of the newest i fields add up to P_hi - P_(i+1): the sub-window sought is the
    -- i-th, for the first field j = i + 1 whose total is below T = P_hi - room (the floor
    -- below the oldest kept field, when none is; U > room makes the floor < T). The totals
    -- fall from the newest to the oldest, so that field is found by bisecting the string's
    -- bytes (a plain find of the next ':' and one number per probe), and its number by
    -- counting the ':' before it in C: no parse of every field (a full window of 1 000
    -- sub-windows took 0.7 ms that way).
    local str, find = l.s, string.find
    local stop = l.cut and l.cut - 1 or #str
    local T = l.phi - room
    local a, b, found = l.sp, stop + 1, nil
    while a < b do
      local c = find(str, ':', math.floor((a + b) / 2), true)
      if not c or c >= b then
        b = math.floor((a + b) / 2)
      elseif string.match(str, '^:(%d+)', c) + 0 < T then
        found, b = c, c
      else
        a = c + 1
      end
    end
    -- j - 1 = the ':' from P_hi's end up to the field found (every one, when none was).
    local _, colons = string.gsub(string.sub(str, l.sp, found or stop), ':', '')
    if not found then
      colons = colons + 1
    end
    local pos = l.hi - colons + 1
    local k = pos - l.lo + 1
    if k > l.B + 1 then
      return l.reset
    end
    return sw_start(l, l.cur + k) - now
  end
end
