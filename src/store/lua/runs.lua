-- sliding_log (SLIDING_LOG): counts at positions (a hit's ts, ms), summed over the positions
-- still in the trailing window: live while pos >= now - W + 1, a position leaves the window
-- at end(pos) = pos + W. (sliding_window, which runs.lua also kept in earlier releases, has its
-- own, cheaper layout: sliding_window.lua.)
-- State: a ZSET with one member per position that holds a count (a run): score = pos,
-- member '%d:%d' = (cum, cnt): cnt = the run's count, cum = a running total, the last entry
-- of this run (modulo 2^53, so it stays exact however long the key lives). cum grows with
-- pos, so U = cum(newest run) - (cum - cnt)(oldest live run). The NEWEST run's member also
-- caches the oldest member of the set, '%d:%d:%d:%d' = (cum, cnt, fpos, fbase): its position
-- and its cum - cnt, as the write that made it left them (written only when that oldest
-- member was live, i.e. nothing expired precedes it). While fpos is still live a load is
-- ONE read (ZRANGE -1 -1); once it left, a second read finds the oldest live run (and the
-- next write prunes). Every write of the newest member refreshes the cache or drops it; a
-- member that stops being the newest keeps a stale one, never read (a refund that makes an
-- older member the newest rewrites it). Every redis.call costs Redis ~5-15k instructions
-- (header.lua), the commands per check are the cost: a charge is 1 read + ZADD (+ ZREM of
-- the old newest member when the hit lands in the same ms) + the expiry when it moves.
-- Every call is bounded, whatever the cost, C or the number of runs:
--   * a charge adds one run, or adds to the newest run when its position is >= the
--     current one (the same ms, or a clock gone backwards: stamped with the newest
--     position, conservatively);
--   * expired runs are pruned lazily, at most RN_PRUNE per write (reads skip them by
--     score; the load that finds the oldest run expired reads the 2 oldest, which
--     usually hold the first live one and tell its rank, what the write prunes); a key with no live run left is dropped with UNLINK (freed off the main
--     thread) by the next write;
--   * a refund takes from the newest runs, at most RN_REFUND (64) of them
--     (docs/explanation/algorithms.md, SLIDING_LOG_REFUND_RUNS);
--   * retry (the run holding the entry that must leave) is a bisection over ranks,
--     O(log^2 N), one probe when every run holds one entry.
-- The key is the state key plus ':r' (script.rs): the keys of releases before the cache
-- (a sorted set of another member format) are never read. Under this name, a newest member without the cache costs the
-- second read once, and a key of one ZSET member per log entry reads as empty and is
-- replaced by the next write.
-- TTL = reset + slack (the newest run's end). Loaded into l.u, l.cur, l.lo, l.reset (ms
-- until the newest counted position leaves the window, 0 when empty; kept up to date by
-- rn_write) and, when a run is live (l.live): l.first (the oldest live run's member, false
-- when it came from the cache), l.fpos and l.base (its position and cum - cnt), l.top,
-- l.ncnt, l.npos, l.nmember (the newest run), l.pruned (no expired run precedes the oldest
-- live one); l.stale: the key holds nothing live.
-- KEYS/ARGV/return: see header.lua; semantics: docs/explanation/algorithms.md.
local rn_load, rn_write, rn_retry
if USES[SLIDING_LOG] then
  local RN_PRUNE, RN_REFUND, RN_M = 64, 64, 9007199254740992

  -- cum, cnt of a member ('cum:cnt', or with the cache, 'cum:cnt:fpos:fbase'), or nil.
  local function rn_parse(m)
    local cum, cnt = string.match(m, '^(%d+):(%d+)$')
    if cum == nil then
      cum, cnt = string.match(m, '^(%d+):(%d+):%d+:%d+$')
      if cum == nil then
        return nil
      end
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

  -- (Globals such as redis.call are looked up where a path needs them: a key with no state,
  -- the common case, needs one read and the few lines before it.)
  rn_load = function(l, now)
    local lo = now - l.W + 1
    l.cur, l.lo, l.u, l.live, l.stale, l.reset = now, lo, 0, false, false, 0
    local last = redis.pcall('ZRANGE', l.key, '-1', '-1', 'WITHSCORES')
    if last[1] == nil then
      if last.err then
        return error(last)
      end
      return
    end
    l.stale = true
    local npos = last[2] + 0
    if npos < lo then
      return
    end
    local top, ncnt, fpos, fbase = string.match(last[1], '^(%d+):(%d+):(%d+):(%d+)$')
    if top ~= nil and fpos + 0 >= lo then
      -- The cached oldest member is live: it is the oldest live run, nothing to prune.
      top, ncnt = top + 0, ncnt + 0
      fpos, fbase = fpos + 0, fbase + 0
    else
      if top ~= nil then
        top, ncnt = top + 0, ncnt + 0
      else
        top, ncnt = rn_parse(last[1])
        if top == nil then
          return
        end
      end
      -- The first live run is usually one of the 2 oldest (one run expired since the last
      -- hit): one read gives it and its rank (what the write prunes); else one more finds
      -- it. (Every member read is a string Lua makes: a wider probe costs more than the
      -- reads it saves.)
      local probe = redis.call('ZRANGE', l.key, '0', '1', 'WITHSCORES')
      local first, rank
      for i = 2, #probe, 2 do
        if probe[i] + 0 >= lo then
          first, fpos, rank = probe[i - 1], probe[i] + 0, i / 2 - 1
          break
        end
      end
      if first == nil then
        local f = redis.call('ZRANGEBYSCORE', l.key, string.format('%d', lo), '+inf',
          'WITHSCORES', 'LIMIT', '0', '1')
        first, fpos, rank = f[1], f[2] + 0, false
      end
      local fcum, fcnt = rn_parse(first)
      if fcum == nil then
        return
      end
      fbase = fcum - fcnt
      if fbase < 0 then
        fbase = fbase + RN_M
      end
      l.pruned, l.first, l.rank = rank == 0, first, rank
      l.live, l.stale, l.fpos, l.base = true, false, fpos, fbase
      l.top, l.ncnt, l.npos, l.nmember = top, ncnt, npos, last[1]
      l.u, l.reset = rn_span(top, fbase), npos + l.W - now
      return
    end
    l.live, l.stale, l.pruned, l.first, l.fpos, l.base = true, false, true, false, fpos, fbase
    l.top, l.ncnt, l.npos, l.nmember = top, ncnt, npos, last[1]
    l.u, l.reset = rn_span(top, fbase), npos + l.W - now
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
      -- all write the same run.) The run is the oldest member too: fpos = cur, fbase = 0.
      local add, cur = n, l.cur
      if add > RN_M then
        add = RN_M
      end
      if l.sa ~= cur or l.sb ~= add then
        local fmt = string.format
        l.sa, l.sb, l.sv = cur, add, fmt('%d', cur)
        l.sm = fmt('%d:%d:%d:0', add % RN_M, add, cur)
      end
      redis.call('ZADD', key, l.sv, l.sm)
      l.live, l.u, l.npos = true, add, cur
    else
      local call, fmt, min = redis.call, string.format, math.min
      -- Runs before the oldest live one have expired: drop at most RN_PRUNE of them.
      local e = not l.pruned and (l.rank or call('ZRANK', key, l.first))
      if e and e > 0 then
        call('ZREMRANGEBYRANK', key, '0', fmt('%d', min(e, RN_PRUNE) - 1))
      end
      -- The cache the newest member carries: the oldest member is the oldest live run
      -- unless more than RN_PRUNE expired runs precede it.
      local X = ''
      if l.pruned or (e and e <= RN_PRUNE) then
        X = fmt(':%d:%d', l.fpos, l.base)
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
            local m = fmt('%d:%d', top, l.ncnt + add) .. X
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
            call('ZADD', key, fmt('%d', l.cur), fmt('%d:%d', top, add) .. X)
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
            local nm = fmt('%d:%d', c, cnt - rem)
            if whole == 0 then
              -- The newest run: it keeps the cache.
              nm = nm .. X
            end
            call('ZADD', key, runs[m + 1], nm)
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
          -- An older run is the newest now: its member gets the current cache (it may hold
          -- a stale one from when it was the newest before).
          local last = call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
          l.npos = last[2] + 0
          local cum, cnt = rn_parse(last[1])
          if cum ~= nil then
            local nm = fmt('%d:%d', cum, cnt) .. X
            if nm ~= last[1] then
              call('ZADD', key, last[2], nm)
              call('ZREM', key, last[1])
            end
          end
        end
      end
    end
    local reset = l.npos + l.W - now
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
  -- >= need; retry = end(its ts).
  rn_retry = function(l, now, n)
    if n > l.C then
      return -1
    end
    local need = l.u - (l.C - n)
    if need <= 0 or not l.live then
      return 0
    end
    local call, fmt = redis.call, string.format
    -- (Rank 0 when nothing expired precedes the oldest live run.)
    local e = 0
    if not l.pruned then
      e = call('ZRANK', l.key, l.first)
    end
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
    return pos + l.W - now
  end
end
