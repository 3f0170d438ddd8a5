-- RLQS subscriptions (store/quota.rs): one call per report batch of one stream.
--
-- KEYS[i]  one hash per bucket: fields d:<sub> (demand, thousandths of a request per
--          second), a:<sub> (share held), e:<sub> (expiry, epoch ms), w (start of the rule's
--          current window), u (requests reported allowed in it).
-- ARGV[1]  mode: "r" (report) or "l" (leave: remove the subscriber from every bucket)
-- ARGV[2]  subscriber id
-- ARGV[3]  now, epoch ms (the replica's clock)
-- ARGV[4]  subscription lifetime, ms
-- ARGV[5]  min share, parts per million
-- ARGV[6]  resend threshold, parts per million
-- then, per key, in "r" mode: limit, window ms, allowed, demand, held
-- Reply in "r" mode: per key, share, subscribers, used, window end (ms).
--
-- settle() is quota::settle (src/quota/mod.rs) line by line: the same double operations in
-- the same order, so both give the same integers.

local mode, me = ARGV[1], ARGV[2]
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local min_ppm, thr_ppm = tonumber(ARGV[5]), tonumber(ARGV[6])

if mode == 'l' then
  for i = 1, #KEYS do
    redis.call('HDEL', KEYS[i], 'd:' .. me, 'a:' .. me, 'e:' .. me)
  end
  return 0
end

local function settle(l, count, odemand, oassigned, my, held)
  local n = count + 1
  local floor = math.min(math.ceil(l * min_ppm / 1e6), math.floor(l / (n + 1)))
  local rest = l - (n + 1) * floor
  local total = odemand + my
  local target
  if total > 0 then
    target = floor + math.floor(rest * (my / total))
  else
    target = floor + math.floor(rest / n)
  end
  local cap = math.max(l - oassigned, 0)
  if held > 0 and held <= cap and math.abs(target - held) * 1e6 <= thr_ppm * held then
    return held
  end
  return math.min(target, cap)
end

local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local base = 6 + (i - 1) * 5
  local limit, window = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local allowed, demand, held = tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5])

  local subs, w, u = {}, 0, 0
  local flat = redis.call('HGETALL', key)
  for j = 1, #flat, 2 do
    local f, v = flat[j], flat[j + 1]
    local p = string.sub(f, 1, 2)
    if p == 'd:' or p == 'a:' or p == 'e:' then
      local s = string.sub(f, 3)
      local t = subs[s]
      if not t then
        t = { d = 0, a = 0, e = 0 }
        subs[s] = t
      end
      t[string.sub(f, 1, 1)] = tonumber(v) or 0
    elseif f == 'w' then
      w = tonumber(v) or 0
    elseif f == 'u' then
      u = tonumber(v) or 0
    end
  end

  local count, odemand, oassigned = 0, 0, 0
  for s, t in pairs(subs) do
    if s ~= me then
      if t.e <= now then
        redis.call('HDEL', key, 'd:' .. s, 'a:' .. s, 'e:' .. s)
      else
        count = count + 1
        odemand = odemand + t.d
        oassigned = oassigned + t.a
      end
    end
  end

  local start = now - now % window
  if w ~= start then
    w = start
    u = 0
  end
  u = u + allowed
  local share = settle(limit, count, odemand, oassigned, demand, held)
  redis.call('HSET', key, 'd:' .. me, demand, 'a:' .. me, share, 'e:' .. me, now + ttl,
    'w', w, 'u', u)
  redis.call('PEXPIRE', key, math.max(ttl, start + window - now))
  out[#out + 1] = share
  out[#out + 1] = count + 1
  out[#out + 1] = u
  out[#out + 1] = start + window
end
return out
