-- botgate's Redis store: add traffic.
-- KEYS[3] minute bucket, KEYS[4] hour bucket, KEYS[5] events, KEYS[6] the website.
-- ARGV: minute ttl ms, hour ttl ms, entries per top list, events kept,
-- n, n counter (field, count) pairs, m, m top-list (field, count) pairs, events (JSON).
-- A top list's size is kept in the hour bucket's field `#` and the list's prefix.
local minute, hour, events = KEYS[3], KEYS[4], KEYS[5]
-- Counts flushed after the website's deletion are not kept for whoever creates the
-- name next.
if redis.call('EXISTS', KEYS[6]) == 0 then return 0 end
local i = 6
local counters = tonumber(ARGV[5])
for _ = 1, counters do
  redis.call('HINCRBY', minute, ARGV[i], ARGV[i + 1])
  redis.call('HINCRBY', hour, ARGV[i], ARGV[i + 1])
  i = i + 2
end
local tops = tonumber(ARGV[i])
i = i + 1
local limit = tonumber(ARGV[3])
for _ = 1, tops do
  local field = ARGV[i]
  if redis.call('HEXISTS', hour, field) == 1 then
    redis.call('HINCRBY', hour, field, ARGV[i + 1])
  else
    local size = '#' .. string.sub(field, 1, 2)
    if tonumber(redis.call('HGET', hour, size) or '0') < limit then
      redis.call('HINCRBY', hour, field, ARGV[i + 1])
      redis.call('HINCRBY', hour, size, 1)
    end
  end
  i = i + 2
end
if counters > 0 then redis.call('PEXPIRE', minute, ARGV[1]) end
if counters + tops > 0 then redis.call('PEXPIRE', hour, ARGV[2]) end
if i <= #ARGV then
  for j = i, #ARGV do redis.call('LPUSH', events, ARGV[j]) end
  redis.call('LTRIM', events, 0, tonumber(ARGV[4]) - 1)
  redis.call('PEXPIRE', events, ARGV[2])
end
return 1
