-- sliding_window (code 2): a count per sub-window index idx(t) = floor(t*B/W), summed over
-- the sub-windows still in the trailing window (cur - B .. cur, cur = idx(now)); a
-- sub-window i leaves at end(i) = start(i + B + 1), start(i) = ceil(i*W/B).
-- State: ONE string, plain integers (like the buckets: a check is one GET, a charge one
-- SET ... PX; every redis.call costs Redis ~5-15k instructions, the Lua around it far less):
--   'hi:lo:S:c_hi:c_hi-1:...:c_lo' ('%d' each)
-- hi = the newest index with a count (c_hi > 0), lo = the oldest index stored, S = the sum
-- of every stored count, then the count of every index from hi down to lo (zeros included,
-- so an index is found by position), newest first: the fields a charge rewrites lead the
-- string, and the tail the window drops is its end. At most B + 1 + (B + 1) fields: a
-- write keeps only the indexes >= cur - B (and adds at most B zeros between hi and cur).
-- Every call is bounded, whatever the cost, C or B (<= 1000):
--   * load: one GET; U = S unless sub-windows left the window (lo < cur - B: their counts,
--     at the end of the string, are subtracted) or all did (hi < cur - B: stale, empty);
--   * a charge adds to c_hi when hi >= cur (the same sub-window, or a clock gone backwards:
--     counted in the newest, conservatively), else puts a new head at cur; the rest of the
--     string is copied as it is unless the window dropped some of its tail;
--   * a refund takes from the newest sub-windows with a count, at most RN_REFUND (64);
--   * retry (the sub-window whose leaving lets the hit pass) scans from the newest.
-- TTL = reset + slack (the newest counted sub-window's end), set by the SET of every write.
-- A key an earlier release wrote (the run-length ZSET of runs.lua's earlier layout, or the
-- hash before it) reads as empty and is replaced by the next write; any other type is an
-- error.
-- Loaded into l.u, l.cur, l.lo (cur - B), l.reset (ms until hi leaves the window, 0 when
-- empty; kept up to date by sw_write), l.live (something is counted), l.stale (the key
-- holds nothing live), and when live: l.hi, l.s (the string), l.sp (where the fields after
-- c_hi start in it), l.tot (S), l.t (the counts, newest first, when they were parsed).
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md "sliding_window".
local sw_load, sw_write, sw_retry
if USES[2] then
  local SW_REFUND, SW_M = 64, 9007199254740992

  -- The counts of state string s, newest first (t[1] = c_hi), as the '%d' strings they are
  -- stored as: table.concat writes them back as they are (it would format a number above
  -- 1e14 as '9.007199254741e+15'), and arithmetic converts them.
  local function sw_parse(s)
    local t, j = {}, -3
    for x in string.gmatch(s, '%d+') do
      if j >= 0 then
        t[j + 1] = x
      end
      j = j + 1
    end
    return t
  end

  sw_load = function(l, now)
    local cur = math.floor(now * l.B / l.W)
    local lo = cur - l.B
    l.cur, l.lo, l.u, l.live, l.stale, l.reset, l.t = cur, lo, 0, false, false, 0, false
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
    local hi, slo, tot, chi, sp = string.match(s, '^(%d+):(%d+):(%d+):(%d+)()')
    l.stale = true
    if hi == nil then
      return
    end
    hi = hi + 0
    if hi < lo then
      return
    end
    tot = tot + 0
    local u = tot
    if slo + 0 < lo then
      -- Sub-windows lo .. slo left: their counts end the string.
      local t = sw_parse(s)
      for i = hi - lo + 2, #t do
        u = u - t[i]
      end
      l.t = t
    end
    l.live, l.stale = true, false
    l.hi, l.s, l.sp, l.tot, l.chi, l.slo = hi, s, sp, tot, chi + 0, slo + 0
    l.u, l.reset = u, math.ceil((hi + l.B + 1) * l.W / l.B) - now
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
        l.sa, l.sb, l.sv = cur, add, fmt('%d:%d:%d:%d', cur, cur, add, add)
      end
      s, hi = l.sv, cur
      l.live, l.u, l.t = true, add, false
    else
      local lo, u, keep = l.lo, l.u, l.hi - l.lo + 1
      hi = l.hi
      if charge then
        local add = math.min(n, SW_M - u)
        local pos = l.cur
        if hi >= pos or add <= 0 then
          pos = hi
        end
        -- The fields after c_hi that stay: all, or those of the sub-windows still in.
        local rest
        if l.slo >= lo then
          rest, lo = string.sub(l.s, l.sp), l.slo
        else
          rest = ''
          if keep > #l.t then
            keep = #l.t
          end
          if keep >= 2 then
            rest = ':' .. table.concat(l.t, ':', 2, keep)
          end
        end
        if pos == hi then
          l.chi = l.chi + add
          s = fmt('%d:%d:%d:%d', hi, lo, u + add, l.chi) .. rest
        else
          s = fmt('%d:%d:%d:%d', pos, lo, u + add, add) .. string.rep(':0', pos - hi - 1)
            .. fmt(':%d', l.chi) .. rest
          l.chi, hi = add, pos
        end
        u = u + add
        l.slo, l.t = lo, false
      else
        -- Refund: from the newest sub-windows with a count, at most SW_REFUND of them.
        local t = l.t or sw_parse(l.s)
        local rem, runs, i = math.min(n, u), 0, 1
        while rem > 0 and i <= keep do
          local c = (t[i] or 0) + 0
          if c > 0 then
            if runs == SW_REFUND then
              break
            end
            runs = runs + 1
            if c <= rem then
              t[i], rem, u = '0', rem - c, u - c
            else
              t[i], u, rem = fmt('%d', c - rem), u - rem, 0
            end
          end
          i = i + 1
        end
        if u <= 0 then
          redis.call('UNLINK', key)
          l.u, l.reset, l.live = 0, 0, false
          return
        end
        -- The newest index still counted is the new head; the tail that left is dropped.
        local h = 1
        while t[h] + 0 == 0 do
          h = h + 1
        end
        if keep > #t then
          keep = #t
        end
        hi = hi - h + 1
        if l.slo > lo then
          lo = l.slo
        end
        s = fmt('%d:%d:%d', hi, lo, u) .. ':' .. table.concat(t, ':', h, keep)
        l.chi, l.slo, l.t = t[h] + 0, lo, false
      end
      l.u = u
    end
    -- (l.s and l.hi are what sw_retry reads after a write.)
    l.s, l.hi = s, hi
    local reset = math.ceil((hi + l.B + 1) * l.W / l.B) - now
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
      return math.ceil((l.cur + 1) * l.W / l.B) - now
    end
    local t = l.t or sw_parse(l.s)
    local acc, pos = 0, nil
    for i = 1, math.min(#t, l.hi - l.lo + 1) do
      acc = acc + t[i]
      if acc > room then
        pos = l.hi - i + 1
        break
      end
    end
    if pos == nil then
      return l.reset
    end
    local k = pos - l.lo + 1
    if k > l.B + 1 then
      return l.reset
    end
    return math.ceil((l.cur + k) * l.W / l.B) - now
  end
end
