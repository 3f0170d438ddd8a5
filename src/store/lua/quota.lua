-- RLQS subscriptions (store/quota.rs): one call per chunk of a stream's report batch
-- (store/redis/quota.rs says how a batch is cut, and why chunks of concurrent reports may
-- interleave).
--
-- KEYS[i]  one hash per bucket: fields d:<sub> (demand, thousandths of a request per
--          second; -1 while unknown), a:<sub> (share held), e:<sub> (expiry, epoch ms).
-- ARGV[1]  mode: "r" (report) or "l" (leave: remove the subscriber from every bucket)
-- ARGV[2]  subscriber id
-- ARGV[3]  now, epoch ms (the replica's clock)
-- ARGV[4]  subscription lifetime, ms
-- ARGV[5]  min share, parts per million
-- ARGV[6]  resend threshold, parts per million
-- ARGV[7]  work budget (report mode; see below)
-- then, per key, in "r" mode: limit, demand (-1: unknown), held
-- Reply in "r" mode: per bucket settled, in KEYS order: share, subscribers, pending (0/1).
--
-- Bounded work: a bucket costs about WORK_PER_BUCKET plus one per value its HGETALL returns
-- (six per subscriber), in one unit (~2.6k Redis instructions, measured with callgrind).
-- Buckets are settled in order while the work spent is below ARGV[7]; the reply may then
-- cover only the first buckets (always at least one), and the caller sends the rest in
-- another call. Each bucket is read, settled and written within one call: never half.
--
-- settle() is quota::settle (src/quota/mod.rs) line by line: the same double operations in
-- the same order, so both give the same integers.

local mode, me = ARGV[1], ARGV[2]
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local min_ppm, thr_ppm = tonumber(ARGV[5]), tonumber(ARGV[6])
local dme, ame, eme = 'd:' .. me, 'a:' .. me, 'e:' .. me

if mode == 'l' then
  for i = 1, #KEYS do
    redis.call('HDEL', KEYS[i], dme, ame, eme)
  end
  return 0
end

local budget = tonumber(ARGV[7])
local WORK_PER_BUCKET = 16

-- my < 0: this subscriber's demand is unknown. Returns the share and whether it is pending.
local function settle(l, count, unknown, odemand, oassigned, my, held)
  local n = count + 1
  local floor = math.min(math.ceil(l * min_ppm / 1e6), math.floor(l / (n + 1)))
  local available = l - floor
  local target
  if my < 0 then
    target = floor
  else
    local known = math.max(count - unknown, 0) + 1
    local mean = (odemand + my) / known
    local total = odemand + my + unknown * mean
    if total > 0 then
      target = math.floor(available * (my / total))
    else
      target = math.floor(available / n)
    end
    target = math.max(target, floor)
  end
  local cap = math.max(l - oassigned, 0)
  local waiting = my >= 0 and unknown > 0
  if held > 0 and held <= cap and math.abs(target - held) * 1e6 <= thr_ppm * held then
    return held, waiting
  end
  return math.min(target, cap), waiting or target > cap
end

local byte, sub = string.byte, string.sub
-- Numbers go to redis.call as strings where they already are one (an ARGV) or are the same
-- for every bucket: Redis formats a Lua number argument with snprintf, after the calls
-- themselves the largest cost of a bucket.
local expires = string.format('%d', now + ttl)
local out, o, spent = {}, 0, 0
for i = 1, #KEYS do
  if spent >= budget then
    break
  end
  local key = KEYS[i]
  local base = 7 + (i - 1) * 3
  local limit, demand, held = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])

  -- The other live subscribers' sums. A field is told apart by its first byte, this
  -- subscriber's own by equality (interned strings: a pointer comparison); an expired
  -- subscriber (rare) is noted, then taken back out of the sums and deleted.
  local count, unknown, odemand, oassigned, expired = 0, 0, 0, 0, nil
  local flat = redis.call('HGETALL', key)
  spent = spent + WORK_PER_BUCKET + #flat
  for j = 1, #flat, 2 do
    local f = flat[j]
    if f ~= dme and f ~= ame and f ~= eme then
      local c = byte(f, 1)
      if c == 100 then -- d:<sub>
        count = count + 1
        local d = tonumber(flat[j + 1]) or 0
        if d < 0 then
          unknown = unknown + 1
        else
          odemand = odemand + d
        end
      elseif c == 97 then -- a:<sub>
        oassigned = oassigned + (tonumber(flat[j + 1]) or 0)
      elseif c == 101 and (tonumber(flat[j + 1]) or 0) <= now then -- e:<sub>, expired
        expired = expired or {}
        expired[sub(f, 3)] = true
      end
    end
  end
  if expired then
    for j = 1, #flat, 2 do
      local f = flat[j]
      local c = byte(f, 1)
      if (c == 100 or c == 97) and expired[sub(f, 3)] then
        local v = tonumber(flat[j + 1]) or 0
        if c == 97 then
          oassigned = oassigned - v
        else
          count = count - 1
          if v < 0 then
            unknown = unknown - 1
          else
            odemand = odemand - v
          end
        end
      end
    end
    for s in pairs(expired) do
      redis.call('HDEL', key, 'd:' .. s, 'a:' .. s, 'e:' .. s)
      spent = spent + 4
    end
  end

  local share, pending = settle(limit, count, unknown, odemand, oassigned, demand, held)
  redis.call('HSET', key, dme, ARGV[base + 2], ame, share, eme, expires)
  redis.call('PEXPIRE', key, ARGV[4])
  out[o + 1] = share
  out[o + 2] = count + 1
  out[o + 3] = pending and 1 or 0
  o = o + 3
end
return out
