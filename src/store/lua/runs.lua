-- sliding_window (code 2) and sliding_log (code 3): counts at positions, summed over the
-- positions still in the trailing window. One representation for both, the run-length
-- entries the memory store keeps:
--   sliding_log: position = the hit's ts (ms), live while pos >= now - W + 1,
--                a position leaves the window at end(pos) = pos + W;
--   sliding_window: position = the sub-window index idx(t) = floor(t*B/W), live while
--                pos >= cur - B (cur = idx(now)), leaves at end(pos) = start(pos + B + 1),
--                start(i) = ceil(i*W/B).
-- State: a ZSET with one member per position that holds a count (a run): score = pos,
-- member '%d:%d' = (cum, cnt): cnt = the run's count, cum = a running total, the last entry
-- of this run (modulo 2^53, so it stays exact however long the key lives). cum grows with
-- pos, so U = cum(newest run) - (cum - cnt)(oldest live run): two O(log N) reads.
-- Every call is bounded, whatever the cost, C, B or the number of runs:
--   * a charge adds one run, or adds to the newest run when its position is >= the
--     current one (the same ms / sub-window, or a clock gone backwards: stamped with the
--     newest position, conservatively);
--   * expired runs are pruned lazily, at most RN_PRUNE per write (reads skip them by
--     score); a key with no live run left is dropped with UNLINK (freed off the main
--     thread) by the next write;
--   * a refund takes from the newest runs, at most RN_REFUND (64) of them
--     (docs/algorithms.md, SLIDING_LOG_REFUND_RUNS);
--   * retry (the run holding the entry that must leave) is a bisection over ranks,
--     O(log^2 N), one probe when every run holds one entry.
-- A key an earlier release wrote (a sliding_window hash, or one ZSET member per log entry)
-- reads as empty and is replaced by the next write.
-- TTL = reset + slack (the newest run's end). Loaded into l.u, l.cur, l.lo, l.reset (ms
-- until the newest counted position leaves the window, 0 when empty; kept up to date by
-- rn_write) and, when a run is live (l.live): l.first (the oldest live run's member), l.base
-- (its cum - cnt), l.top, l.ncnt, l.npos, l.nmember (the newest run), l.pruned (no expired
-- run precedes the oldest live one); l.stale: the key holds nothing live.
-- KEYS/ARGV/return: see header.lua; semantics: docs/algorithms.md.
local rn_load, rn_write, rn_retry
if USES[2] or USES[3] then
  local RN_PRUNE, RN_REFUND, RN_M = 64, 64, 9007199254740992

  -- cum, cnt of a member, or nil.
  local function rn_parse(m)
    local cum, cnt = string.match(m, '^(%d+):(%d+)$')
    if cum == nil then
      return nil
    end
    return cum + 0, cnt + 0
  end

  -- (a - b) mod 2^53 in (0, 2^53] for two cum values (a live span is never empty).
  local function rn_span(a, b)
    local d = a - b
    if d <= 0 then
      d = d + RN_M
    end
    return d
  end

  -- The time (ms) at which position pos leaves the trailing window.
  local function rn_end(l, pos)
    if l.code == 3 then
      return pos + l.W
    end
    return math.ceil((pos + l.B + 1) * l.W / l.B)
  end

  -- (Globals such as redis.call are looked up where a path needs them: a key with no state,
  -- the common case, needs one read and the few lines before it.)
  rn_load = function(l, now)
    local cur, lo
    if l.code == 3 then
      cur, lo = now, now - l.W + 1
    else
      cur = math.floor(now * l.B / l.W)
      lo = cur - l.B
    end
    l.cur, l.lo, l.u, l.live, l.stale, l.reset = cur, lo, 0, false, false, 0
    local last = redis.pcall('ZRANGE', l.key, '-1', '-1', 'WITHSCORES')
    if last[1] == nil then
      if last.err then
        if l.code == 2 and redis.call('TYPE', l.key).ok == 'hash' then
          l.stale = true
          return
        end
        return error(last)
      end
      return
    end
    local call, fmt = redis.call, string.format
    l.stale = true
    local npos = last[2] + 0
    local top, ncnt = rn_parse(last[1])
    if top == nil or npos < lo then
      return
    end
    -- The oldest run is usually live: one read (and nothing to prune); else the first live
    -- one.
    local first = call('ZRANGE', l.key, '0', '0', 'WITHSCORES')
    local pruned = first[2] + 0 >= lo
    if not pruned then
      first = call('ZRANGEBYSCORE', l.key, fmt('%d', lo), '+inf', 'LIMIT', '0', '1')
    end
    local fcum, fcnt = rn_parse(first[1])
    if fcum == nil then
      return
    end
    local base = fcum - fcnt
    if base < 0 then
      base = base + RN_M
    end
    l.live, l.stale, l.pruned = true, false, pruned
    l.first, l.base = first[1], base
    l.top, l.ncnt, l.npos, l.nmember = top, ncnt, npos, last[1]
    l.u, l.reset = rn_span(top, base), rn_end(l, npos) - now
  end

  -- Charge n at the current position (the total saturates at 2^53), or refund up to n from
  -- the newest runs; prune; save.
  -- timed: Redis TIME is the clock, so the TTL (the newest run's end plus slack) is an
  -- absolute time that only moves with the newest run.
  rn_write = function(l, now, n, slack, charge, timed)
    local key = l.key
    local npos0 = l.live and l.npos
    if not l.live then
      -- Nothing live: what the key holds has expired (or is an earlier release's).
      if l.stale then
        redis.call('UNLINK', key)
      end
      if not charge or n <= 0 then
        return
      end
      -- (The strings are cached on l, sa, sb -> sv, sm: the fresh keys of one rule in a call
      -- all write the same run.)
      local add, cur = n, l.cur
      if add > RN_M then
        add = RN_M
      end
      if l.sa ~= cur or l.sb ~= add then
        local fmt = string.format
        l.sa, l.sb, l.sv, l.sm = cur, add, fmt('%d', cur), fmt('%d:%d', add % RN_M, add)
      end
      redis.call('ZADD', key, l.sv, l.sm)
      l.live, l.u, l.npos = true, add, cur
    else
      local call, fmt, min = redis.call, string.format, math.min
      -- Runs before the oldest live one have expired: drop at most RN_PRUNE of them.
      local e = not l.pruned and call('ZRANK', key, l.first)
      if e and e > 0 then
        call('ZREMRANGEBYRANK', key, '0', fmt('%d', min(e, RN_PRUNE) - 1))
      end
      if charge then
        local add = min(n, RN_M - l.u)
        if add > 0 then
          -- top + add modulo 2^53, without forming a sum above 2^53.
          local top = l.top
          if add >= RN_M - top then
            top = add - (RN_M - top)
          else
            top = top + add
          end
          if l.npos >= l.cur then
            local m = fmt('%d:%d', top, l.ncnt + add)
            -- Add before removing: removing a zset's only member deletes the key, and its
            -- TTL with it (the timed path below keeps the TTL the key has).
            call('ZADD', key, fmt('%d', l.npos), m)
            call('ZREM', key, l.nmember)
            -- (An overdraft's retry still searches from the oldest live run.)
            if l.first == l.nmember then
              l.first = m
            end
            l.nmember = m
          else
            call('ZADD', key, fmt('%d', l.cur), fmt('%d:%d', top, add))
            l.npos = l.cur
          end
          l.u = l.u + add
        end
      else
        local runs = call('ZREVRANGEBYSCORE', key, '+inf', fmt('%d', l.lo), 'WITHSCORES',
          'LIMIT', '0', fmt('%d', RN_REFUND))
        local rem, whole, m = min(n, l.u), 0, 1
        while rem > 0 and runs[m] ~= nil do
          local cum, cnt = rn_parse(runs[m])
          if cum == nil then
            break
          end
          if cnt <= rem then
            whole, rem, l.u = whole + 1, rem - cnt, l.u - cnt
          else
            local c = cum - rem
            if c < 0 then
              c = c + RN_M
            end
            call('ZADD', key, runs[m + 1], fmt('%d:%d', c, cnt - rem))
            call('ZREM', key, runs[m])
            l.u, rem = l.u - rem, 0
          end
          m = m + 2
        end
        if l.u <= 0 then
          call('UNLINK', key)
          l.reset = 0
          return
        end
        if whole > 0 then
          call('ZREMRANGEBYRANK', key, fmt('%d', -whole), '-1')
          l.npos = call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2] + 0
        end
      end
    end
    local reset = rn_end(l, l.npos) - now
    l.reset = reset
    if timed and npos0 == l.npos then
      -- The expiry the key has.
      return
    end
    -- (Absolute with TIME: see EXPIRE in header.lua.)
    local t = reset + slack
    if t < 1 then
      t = 1
    end
    if timed then
      t = now + t
    end
    if l.st ~= t then
      l.st, l.sts = t, string.format('%d', t)
    end
    redis.call(timed and 'PEXPIREAT' or 'PEXPIRE', key, l.sts)
  end

  -- Denied with n <= C: the entry that must leave first is the need-th oldest live one,
  -- need = U - (C - n); it is in the first live run whose cum (as an offset from base) is
  -- >= need. sliding_log: retry = end(its ts). sliding_window: k = its index - (cur - B) + 1
  -- sub-windows must leave, retry = start(cur + k) - now, or reset when k > B + 1 (only after
  -- the clock went backwards).
  rn_retry = function(l, now, n)
    if n > l.C then
      return -1
    end
    local need = l.u - (l.C - n)
    if need <= 0 or not l.live then
      if l.code == 3 then
        return 0
      end
      return math.ceil((l.cur + 1) * l.W / l.B) - now
    end
    local call, fmt = redis.call, string.format
    local e = call('ZRANK', l.key, l.first)
    local last = call('ZCARD', l.key) - 1
    local lo, hi = math.max(e, last - (l.u - need)), math.min(last, e + need - 1)
    local pos
    while lo <= hi do
      local mid = math.floor((lo + hi) / 2)
      local r = call('ZRANGE', l.key, fmt('%d', mid), fmt('%d', mid), 'WITHSCORES')
      local cum, cnt = rn_parse(r[1])
      if cum == nil then
        break
      end
      local off = rn_span(cum, l.base)
      if off >= need then
        if off - cnt < need then
          pos = r[2] + 0
          break
        end
        hi = mid - 1
      else
        lo = mid + 1
      end
    end
    if pos == nil then
      return l.reset
    end
    if l.code == 3 then
      return pos + l.W - now
    end
    local k = pos - l.lo + 1
    if k > l.B + 1 then
      return l.reset
    end
    return math.ceil((l.cur + k) * l.W / l.B) - now
  end
end
