-- The check protocol (docs/algorithms.md "One check"), run over the checks parsed by
-- header.lua with the algorithms above, one check after the other, as straight-line loops
-- (no local functions: see "Cost" in header.lua). KEYS/ARGV/return: see header.lua.
--
-- Usage u is what every decision reads: the window algorithms (codes 1-3) count requests,
--   fits: u + n <= C    remaining: max(0, C - u)    used_before: u
-- and the buckets (4-6) hold a scaled level in [0, L] (one request = W units, R units/ms),
--   fits: n <= C and n*W <= Cs - u    remaining: floor(max(0, Cs - u) / W)
--   charge: u = min(u + n*W, L)    refund: u = max(0, u - n*W)    used_before: ceil(u / W)
--   reset: lag + ceil(u / R)    retry (n <= C): lag + ceil((u - (Cs - n*W)) / R)
-- (Cs - u is token_bucket's tokens; no intermediate leaves [-2^53, 2^53] unless a min/max
-- clamps it). An inert bucket (R = 0) is never loaded, charged or saved.

-- Stop-increment over several checks ('1'): a first pass, reading only, learns whether any
-- check is denied (then no admitted check is charged); then the pass that decides, writes and
-- reports, check after check. Every other mode is the second pass alone.
local held = mode == '2'
local out = { now, 0, 0, 0, 0, 0, 0 } -- presized for one limit
local first_pass = 2
if mode == '1' and nc > 3 then
  first_pass = 1
end
for pass = first_pass, 2 do
  local at = 0 -- limits of the checks before this one
  for j = 1, nc, 3 do
    local n, refund, k = CHK[j], CHK[j + 1], CHK[j + 2]
    -- 1. Load every limit's state, brought to now (reads only).
    for i = at + 1, at + k do
      local l = LIMITS[i]
      local code = l.code
      -- (Only cleared when set by a first pass: assigning a missing field, even nil, can
      -- grow the table.)
      if l.left then
        l.left = nil
      end
      if code == 1 then
        fw_load(l, now)
      elseif code <= 3 then
        rn_load(l, now)
      elseif l.R == 0 then
        -- inert
      elseif code == 4 then
        tb_load(l, now)
      elseif code == 5 then
        lb_load(l, now)
      else
        gcra_load(l, now)
      end
      if code >= 4 then
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
      for i = at + 1, at + k do
        LIMITS[i].ok = true
      end
    else
      -- 2. Penalty: an active lock (lock_until > now) denies without touching counters.
      for i = at + 1, at + k do
        local l = LIMITS[i]
        if l.pen > 0 then
          local until_ms = call('GET', l.lock)
          until_ms = until_ms and tonumber(until_ms)
          if until_ms and until_ms > now then
            l.left = until_ms - now
            write = false
          end
        end
      end
      -- 3. Decide.
      for i = at + 1, at + k do
        local l = LIMITS[i]
        local ok
        if l.left then
          ok = false
        elseif l.code < 4 then
          ok = l.u + n <= l.C
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
      if write and mode ~= '3' and not (held and all_ok and not refund) then
        -- 4. Charge (all-or-nothing, except that overdraft limits are always charged) or
        -- refund; 6. save.
        for i = at + 1, at + k do
          local l = LIMITS[i]
          local code = l.code
          if refund or all_ok or l.od then
            if code == 1 then
              fw_write(l, now, n, slack, not refund)
            elseif code <= 3 then
              rn_write(l, now, n, slack, not refund)
            elseif l.R > 0 then
              if refund then
                l.u = max(0, l.u - n * l.W)
              else
                l.u = min(l.u + n * l.W, l.L)
              end
              local reset = l.lag + ceil(l.u / l.R)
              if code == 4 then
                tb_save(l, now, slack, reset)
              elseif code == 5 then
                lb_save(l, now, slack, reset)
              else
                gcra_save(l, now, slack, reset)
              end
            end
          end
        end
        -- 5. Lock every denying limit that has a penalty.
        if not all_ok then
          for i = at + 1, at + k do
            local l = LIMITS[i]
            if l.pen > 0 and not l.ok then
              call('SET', l.lock, fmt('%d', now + l.pen), 'PX', fmt('%d', max(1, l.pen + slack)))
              l.locked = true
            end
          end
        end
      end
      -- 7. Report, from the state after the charge.
      for i = at + 1, at + k do
        local l = LIMITS[i]
        local code = l.code
        local remaining, reset, retry, penalized = 0, 0, -1, 0
        if code == 1 then
          reset = l.ws + l.W - now
        elseif code <= 3 then
          reset = rn_reset(l, now)
        elseif l.R > 0 then
          reset = l.lag + ceil(l.u / l.R)
        end
        if l.ok then
          if code < 4 then
            remaining = max(0, l.C - l.u)
          elseif l.R > 0 then
            remaining = floor(max(0, l.Cs - l.u) / l.W)
          end
        elseif l.left then
          retry = l.left
          penalized = 1
        else
          if code == 1 then
            -- The window end even when n > C: envoyproxy/ratelimit's answer.
            retry = reset
          elseif code <= 3 then
            retry = rn_retry(l, now, n)
          elseif l.R > 0 and n <= l.C then
            retry = l.lag + ceil((l.u - (l.Cs - n * l.W)) / l.R)
          end
          -- A fresh lock extends the retry; "never" (-1) stays never.
          if l.locked and retry >= 0 then
            retry = max(retry, l.pen)
          end
        end
        local b = 6 * i - 4
        out[b] = l.ok and 1 or 0
        out[b + 1] = remaining
        out[b + 2] = reset
        out[b + 3] = retry
        out[b + 4] = l.used
        out[b + 5] = penalized
      end
    end
    at = at + k
  end
end
return out
