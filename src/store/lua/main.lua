-- The check protocol (docs/explanation/algorithms.md "One check"), run over the checks parsed by
-- header.lua with the algorithms above, one check after the other. KEYS/ARGV/return: see
-- header.lua.
--
-- Usage u is what every decision reads: the counting algorithms (codes below LEVEL) count requests,
--   fits: n <= C - u    remaining: max(0, C - u)    used_before: u
-- (n <= C - u, not u + n <= C: with u and C up to 2^53, u + n may round down to C in a
-- double, e.g. 2^53 + 1; C - u is exact, and a cost above 2^53 arrives as 2^54)
-- and the buckets (codes from LEVEL) hold a scaled level in [0, L] (one request = W units, R units/ms),
--   fits: n <= C and n*W <= Cs - u    remaining: floor(max(0, Cs - u) / W)
--   charge: u = min(u + n*W, L)    refund: u = max(0, u - n*W)    used_before: ceil(u / W)
--   reset: lag + ceil(u / R)    retry (n <= C): lag + ceil((u - (Cs - n*W)) / R)
-- (Cs - u is token_bucket's tokens; no intermediate leaves [-2^53, 2^53] unless a min/max
-- clamps it). An inert bucket (R = 0) is never loaded, charged or saved.
--
-- Three paths, one protocol: what a check needs decides which runs it (see "Cost" in
-- header.lua for why the common cases get straight-line code of their own):
--   1. a charged hit on one fixed_window limit with overdraft: its own code, in locals
--      (HINCRBY, fixed_window.lua's layout);
--   2. any other check of one limit without a penalty that is not a refund (a hit or a
--      peek): steps 1, 3, 4, 6 and 7 for k = 1, on the pool's first table;
--   3. everything else (several limits, penalties, refunds, a stop-increment's first
--      pass): every step, as loops over the check's limits.
-- The differential test (integration/redis_vs_native.rs) runs all three against the model.
-- (Over 400 lines: the three paths are one protocol, kept in one file to be read side by
-- side; Lua has no cheap way to split them, see "Cost" in header.lua.)

-- Stop-increment over several checks (mode 1): a first pass, reading only, learns whether any
-- check is denied (then no admitted check is charged); then the pass that decides, writes and
-- reports, check after check. Every other mode is the second pass alone.
local held = mode == 2
-- The reply, presized (a table that grows costs a rehash at every power of 2): for one limit,
-- or for four; cut after the last value written (Redis ends an array reply at the first
-- nil).
local out
if nl <= 1 then
  out = { now, 0, 0, 0, 0, 0, 0 }
else
  out = {
    now, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  }
end
local first_pass = 2
if mode == 1 and nc > 1 then
  first_pass = 1
end

-- The pool table for limit position i, bound to the limit whose parameters start at A[p + 1]
-- (copied only when the limit at that position changes: the checks of one rule follow one
-- another). Every field paths 1 and 2 set is created here, or fits in the room these leave
-- (32 slots: a table that must grow costs a rehash).
local function bind(i, p)
  local l = POOL[i]
  if not l then
    l = {
      b = 0, code = 0, W = 0, C = 0, R = 0, B = 0, od = false, pen = 0, Cs = 0, L = 0,
      key = false, u = 0, lag = 0, ts = 0, cws = false, sa = false, st = false, cal = false,
    }
    POOL[i] = l
  end
  if l.b ~= p then
    local code, R, W, C = A[p + 1], A[p + 2], A[p + 3], A[p + 4]
    l.b, l.code, l.R, l.W, l.C, l.B, l.od, l.pen = p, code, R, W, C, A[p + 5], A[p + 6] == 1, A[p + 7]
    local z = A[p + 8]
    l.cal = z ~= 0 and CAL[p + z]
    if code >= LEVEL then
      l.Cs, l.L = C * W, min(EXACT, 4503599627370496 * R)
    end
    -- (What the algorithms cached for the previous limit.)
    l.cws, l.sa, l.st = false, false, false
  end
  return l
end

-- Path 1's fixed-window strings for the window of width fW (or of calendar fC) at now: its
-- start fws, end fwe, field name and TTL, and for the cost fn, formatted once per call
-- whatever the number of checks.
local fW, fC, fws, fwe, fwf, fx, fn, fnv = false, false, 0, 0, false, false, -1, false
local o -- the last value of out
for pass = first_pass, 2 do
  local kx = 1 -- the next key
  o = 1
  for j = first, nargv, 2 do
    local n, g = A[j], A[j + 1]
    if DUP and DUP[(j - first) / 2 + 1] then
      -- Applied before under its id: report only.
      n, g = 0, max(g, -g)
    end
    local refund = g < 0
    if refund then
      g = -g
    end
    local b = GR[2 * g - 1]
    local k = A[b]
    local pens = GR[2 * g] > k
    if k == 1 and A[b + 1] == FIXED_WINDOW and A[b + 6] == 1 and n > 0 and n <= 4503599627370496
      and pass == 2 and not refund and not pens and mode ~= 3 and not held then
      -- Path 1: a hit on one fixed_window limit with overdraft (charged whatever it
      -- decides: the envoyproxy/ratelimit rule) and no penalty. One HINCRBY, and on the
      -- window's first hit on the key one PEXPIRE ... NX, which sets the TTL unless the key
      -- had one, i.e. held another window's field (then resolved as fixed_window.lua says).
      -- n <= 2^52 keeps c + n exact in Lua's doubles up to the 2^53 saturation.
      local W, C, z = A[b + 3], A[b + 4], A[b + 8]
      local cal = z ~= 0 and CAL[b + z]
      local key = KEYS[kx]
      kx = kx + 1
      if fW ~= W or fC ~= cal then
        fW, fC = W, cal
        if cal then
          fws, fwe = cal[2 + cal[7]], cal[3 + cal[7]]
        else
          fws = now - now % W
          fwe = fws + W
        end
        fwf, fx = fmt('%d', fws), fmt('%d', XB + max(1, fwe - now + slack))
      end
      if fn ~= n then
        fn, fnv = n, fmt('%d', n)
      end
      local ws, we, f = fws, fwe, fwf
      local v = call('HINCRBY', key, f, fnv)
      if v == n then
        -- The field is new. Redis < 7 has no PEXPIRE ... NX: HLEN tells the same.
        local other
        if V7 then
          other = call(EXPIRE, key, fx, 'NX') == 0
        else
          other = call('HLEN', key) > 1
          if not other then
            call(EXPIRE, key, fx)
          end
        end
        if other then
          local h = call('HGETALL', key)
          local latest = fws
          for i = 1, #h, 2 do
            local x = h[i] + 0
            if x > latest then
              latest, f = x, h[i]
            end
          end
          if latest > fws then
            -- The clock went backwards: the later window is charged instead.
            call('HDEL', key, fwf)
            ws = latest
            we = fw_end(cal, ws, fws, fwe)
            v = call('HINCRBY', key, f, fnv)
          else
            for i = 1, #h, 2 do
              if h[i] ~= fwf then
                call('HDEL', key, h[i])
              end
            end
            call(EXPIRE, key, fx)
          end
        end
      elseif not timed then
        call(EXPIRE, key, fx)
      end
      local c = v - n
      if v >= EXACT then
        -- Saturated (or about to be): v may be inexact; take the charge back for the exact
        -- count before it, then store 2^53.
        c = call('HINCRBY', key, f, fmt('%d', -n))
        v = EXACT
        call('HSET', key, f, '9007199254740992')
      end
      -- Decided on the count before the hit (exact), not on v, which saturates.
      local ok = n <= C - c
      local reset = we - now
      if ok then
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, C - v, reset, -1
      else
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 0, reset, reset
      end
      out[o + 5], out[o + 6] = c, 0
      o = o + 6
    elseif k == 1 and pass == 2 and not pens and not refund then
      -- Path 2: one limit, no penalty, a hit or a peek. (A first pass, which learns whether
      -- the request has a denial, is path 3's.)
      local l = POOL[1]
      if not l or l.b ~= b then
        l = bind(1, b)
      end
      l.key, l.u, l.lag = KEYS[kx], 0, 0
      kx = kx + 1
      local code, W, C, R = l.code, l.W, l.C, l.R
      -- 1. Load.
      if code == FIXED_WINDOW then
        fw_load(l, now, slack, XB, fw_end)
      elseif code == SLIDING_WINDOW then
        sw_load(l, now)
      elseif code == SLIDING_LOG then
        rn_load(l, now)
      elseif R == 0 then
        -- inert
      elseif code == TOKEN_BUCKET then
        tb_load(l, now)
      elseif code == LEAKY_BUCKET then
        lb_load(l, now)
      elseif code == GCRA then
        gcra_load(l, now)
      end
      local u = l.u
      local used, ok
      -- 3. Decide.
      if code < LEVEL then
        used, ok = u, n <= C - u
      elseif R == 0 then
        used, ok = 0, n == 0
      else
        used, ok = ceil(u / W), n <= C and n * W <= l.Cs - u
      end
      -- 4. Charge (n > 0: a hit), 6. save; unless held (stop-increment: an admitted check is
      -- not charged) or a dry run.
      if n > 0 and mode ~= 3 and (ok or l.od) and not (held and ok) then
        if code == FIXED_WINDOW then
          fw_write(l, now, n, slack, true, timed)
        elseif code == SLIDING_WINDOW then
          sw_write(l, now, n, slack, true, timed)
        elseif code == SLIDING_LOG then
          rn_write(l, now, n, slack, true, timed)
        elseif R > 0 then
          u = min(u + n * W, l.L)
          l.u = u
          local reset = l.lag + ceil(u / R)
          if code == TOKEN_BUCKET then
            tb_save(l, now, slack, reset)
          elseif code == LEAKY_BUCKET then
            lb_save(l, now, slack, reset)
          elseif code == GCRA then
            gcra_save(l, now, slack, reset)
          end
        end
        u = l.u
      end
      -- 7. Report.
      local remaining, reset, retry = 0, 0, -1
      if code == FIXED_WINDOW then
        reset = l.we - now
      elseif code < LEVEL then
        reset = l.reset
      elseif R > 0 then
        reset = l.lag + ceil(u / R)
      end
      if ok then
        if code < LEVEL then
          remaining = max(0, C - u)
        elseif R > 0 then
          remaining = floor(max(0, l.Cs - u) / W)
        end
      elseif code == FIXED_WINDOW then
        -- The window end even when n > C: envoyproxy/ratelimit's answer.
        retry = reset
      elseif code == SLIDING_WINDOW then
        retry = sw_retry(l, now, n)
      elseif code == SLIDING_LOG then
        retry = rn_retry(l, now, n)
      elseif R > 0 and n <= C then
        retry = l.lag + ceil((u - (l.Cs - n * W)) / R)
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok and 1 or 0, remaining, reset, retry
      out[o + 5], out[o + 6] = used, 0
      o = o + 6
    else
      -- Path 3: every step, over the check's limits.
      -- 1. Bind the pool to this check's limits and keys, load every limit's state, brought
      -- to now (reads only).
      for i = 1, k do
        local l = bind(i, b + 8 * i - 8)
        l.key, l.u, l.lag, l.left, l.locked = KEYS[kx], 0, 0, false, false
        kx = kx + 1
        if l.pen > 0 then
          l.lock = KEYS[kx]
          kx = kx + 1
        end
        local code = l.code
        if code == FIXED_WINDOW then
          fw_load(l, now, slack, XB, fw_end)
        elseif code == SLIDING_WINDOW then
          sw_load(l, now)
        elseif code == SLIDING_LOG then
          rn_load(l, now)
        elseif l.R == 0 then
          -- inert
        elseif code == TOKEN_BUCKET then
          tb_load(l, now)
        elseif code == LEAKY_BUCKET then
          lb_load(l, now)
        elseif code == GCRA then
          gcra_load(l, now)
        end
        if code >= LEVEL then
          l.used = ceil(l.u / l.W)
        else
          l.used = l.u
        end
      end
      -- Whether limits are written (charged or refunded, then saved): a refund of n > 0
      -- writes every limit; a hit only writes when n > 0 and nothing is penalized.
      local write, all_ok = n > 0, true
      if refund then
        -- Refund: give n back everywhere, never below empty; always allowed; penalties
        -- untouched.
        for i = 1, k do
          POOL[i].ok = true
        end
      else
        -- 2. Penalty: an active lock (lock_until > now) denies without touching counters.
        if pens then
          for i = 1, k do
            local l = POOL[i]
            if l.pen > 0 then
              local until_ms = call('GET', l.lock)
              until_ms = until_ms and tonumber(until_ms)
              if until_ms and until_ms > now then
                l.left = until_ms - now
                write = false
              end
            end
          end
        end
        -- 3. Decide.
        for i = 1, k do
          local l = POOL[i]
          local ok
          if l.left then
            ok = false
          elseif l.code < LEVEL then
            ok = n <= l.C - l.u
          elseif l.R == 0 then
            ok = n == 0
          else
            ok = n <= l.C and n * l.W <= l.Cs - l.u
          end
          l.ok = ok
          all_ok = all_ok and ok
        end
      end
      if pass == 1 then
        if not refund and not all_ok then
          held = true
          break
        end
      else
        -- Held (stop-increment, the request has a denial): an admitted check is not charged.
        if write and mode ~= 3 and not (held and all_ok and not refund) then
          -- 4. Charge (all-or-nothing, except that overdraft limits are always charged) or
          -- refund; 6. save.
          for i = 1, k do
            local l = POOL[i]
            local code = l.code
            if refund or all_ok or l.od then
              if code == FIXED_WINDOW then
                fw_write(l, now, n, slack, not refund, timed)
              elseif code == SLIDING_WINDOW then
                sw_write(l, now, n, slack, not refund, timed)
              elseif code == SLIDING_LOG then
                rn_write(l, now, n, slack, not refund, timed)
              elseif l.R > 0 then
                if refund then
                  l.u = max(0, l.u - n * l.W)
                else
                  l.u = min(l.u + n * l.W, l.L)
                end
                local reset = l.lag + ceil(l.u / l.R)
                if code == TOKEN_BUCKET then
                  tb_save(l, now, slack, reset)
                elseif code == LEAKY_BUCKET then
                  lb_save(l, now, slack, reset)
                elseif code == GCRA then
                  gcra_save(l, now, slack, reset)
                end
              end
            end
          end
          -- 5. Lock every denying limit that has a penalty.
          if not all_ok then
            for i = 1, k do
              local l = POOL[i]
              local pen = l.pen
              if pen > 0 and not l.ok then
                call('SET', l.lock, fmt('%d', now + pen), 'PX', fmt('%d', max(1, pen + slack)))
                l.locked = true
              end
            end
          end
        end
        -- 7. Report, from the state after the charge.
        for i = 1, k do
          local l = POOL[i]
          local code = l.code
          local remaining, reset, retry, penalized = 0, 0, -1, 0
          if code == FIXED_WINDOW then
            reset = l.we - now
          elseif code < LEVEL then
            reset = l.reset
          elseif l.R > 0 then
            reset = l.lag + ceil(l.u / l.R)
          end
          if l.ok then
            if code < LEVEL then
              remaining = max(0, l.C - l.u)
            elseif l.R > 0 then
              remaining = floor(max(0, l.Cs - l.u) / l.W)
            end
          elseif l.left then
            retry = l.left
            penalized = 1
          else
            if code == FIXED_WINDOW then
              -- The window end even when n > C: envoyproxy/ratelimit's answer.
              retry = reset
            elseif code == SLIDING_WINDOW then
              retry = sw_retry(l, now, n)
            elseif code == SLIDING_LOG then
              retry = rn_retry(l, now, n)
            elseif l.R > 0 and n <= l.C then
              retry = l.lag + ceil((l.u - (l.Cs - n * l.W)) / l.R)
            end
            -- A fresh lock extends the retry; "never" (-1) stays never.
            if l.locked and retry >= 0 then
              retry = max(retry, l.pen)
            end
          end
          out[o + 1] = l.ok and 1 or 0
          out[o + 2] = remaining
          out[o + 3] = reset
          out[o + 4] = retry
          out[o + 5] = l.used
          out[o + 6] = penalized
          o = o + 6
        end
      end
    end
  end
end
out[o + 1] = nil
return out
