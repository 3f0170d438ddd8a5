-- The check protocol (docs/algorithms.md "One check"), run over the checks parsed by
-- header.lua with the algorithms above, one check after the other. KEYS/ARGV/return: see
-- header.lua.
--
-- Usage u is what every decision reads: the window algorithms (codes 1-3) count requests,
--   fits: u + n <= C    remaining: max(0, C - u)    used_before: u
-- and the buckets (4-6) hold a scaled level in [0, L] (one request = W units, R units/ms),
--   fits: n <= C and n*W <= Cs - u    remaining: floor(max(0, Cs - u) / W)
--   charge: u = min(u + n*W, L)    refund: u = max(0, u - n*W)    used_before: ceil(u / W)
--   reset: lag + ceil(u / R)    retry (n <= C): lag + ceil((u - (Cs - n*W)) / R)
-- (Cs - u is token_bucket's tokens; no intermediate leaves [-2^53, 2^53] unless a min/max
-- clamps it). An inert bucket (R = 0) is never loaded, charged or saved.

-- Steps 1-3 for check c (reads only): load every limit brought to now, penalties, decide.
-- Sets l.ok, l.left (penalized: ms left), l.used, and c.all_ok, c.write.
local function decide(c)
  local n, limits = c.n, c.limits
  for i = 1, #limits do
    local l = limits[i]
    local code = l.code
    l.left, l.locked = nil, nil
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
  -- Whether limits are written (charged or refunded, then saved): a refund of n > 0 writes
  -- every limit; a hit only writes when n > 0 and nothing is penalized.
  local write, all_ok = n > 0, true
  if c.refund then
    -- Refund: give n back everywhere, never below empty; always allowed; penalties untouched.
    for i = 1, #limits do
      limits[i].ok = true
    end
  else
    -- 2. Penalty: an active lock (lock_until > now) denies without touching counters.
    for i = 1, #limits do
      local l = limits[i]
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
    for i = 1, #limits do
      local l = limits[i]
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
  c.write, c.all_ok = write, all_ok
end

-- Steps 4-6 for check c: charge (all-or-nothing, except that overdraft limits are always
-- charged) or refund, save; lock every denying limit that has a penalty. `held`: the
-- request has a denied check and stop-increment is on, so an admitted check is not charged.
local function apply(c, held)
  if not c.write or (held and c.all_ok and not c.refund) then
    return
  end
  local n, refund, all_ok, limits = c.n, c.refund, c.all_ok, c.limits
  for i = 1, #limits do
    local l = limits[i]
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
  if not all_ok then
    for i = 1, #limits do
      local l = limits[i]
      if l.pen > 0 and not l.ok then
        call('SET', l.lock, fmt('%d', now + l.pen), 'PX', fmt('%d', max(1, l.pen + slack)))
        l.locked = true
      end
    end
  end
end

-- 7. Report check c into out, from the state after the charge.
local function report(c, out)
  local n, limits = c.n, c.limits
  for i = 1, #limits do
    local l = limits[i]
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
    local b = #out
    out[b + 1] = l.ok and 1 or 0
    out[b + 2] = remaining
    out[b + 3] = reset
    out[b + 4] = retry
    out[b + 5] = l.used
    out[b + 6] = penalized
  end
end

-- Stop-increment over several checks: first learn, reading only, whether any check denies.
local held = mode == '2'
if mode == '1' and #CHECKS > 1 then
  for j = 1, #CHECKS do
    local c = CHECKS[j]
    decide(c)
    if not c.refund and not c.all_ok then
      held = true
      break
    end
  end
end
local out = { now }
for j = 1, #CHECKS do
  local c = CHECKS[j]
  decide(c)
  if mode ~= '3' then
    apply(c, held)
  end
  report(c, out)
end
return out
