-- botgate's Redis store: add traffic.
-- KEYS[3] minute bucket, KEYS[4] hour bucket, KEYS[5] events.
-- ARGV: minute ttl ms, hour ttl ms, hour bucket's most fields, events kept,
-- n, n counter (field, count) pairs, m, m top-list (field, count) pairs, events (JSON).
local minute, hour, events = KEYS[3], KEYS[4], KEYS[5]
local i = 6
local counters = tonumber(ARGV[5])
for _ = 1, counters do
  redis.call('HINCRBY', minute, ARGV[i], ARGV[i + 1])
  redis.call('HINCRBY', hour, ARGV[i], ARGV[i + 1])
  i = i + 2
end
local tops = tonumber(ARGV[i])
i = i + 1
local room = tonumber(ARGV[3]) - redis.call('HLEN', hour)
for _ = 1, tops do
  if redis.call('HEXISTS', hour, ARGV[i]) == 1 then
    redis.call('HINCRBY', hour, ARGV[i], ARGV[i + 1])
  elseif room > 0 then
    redis.call('HINCRBY', hour, ARGV[i], ARGV[i + 1])
    room = room - 1
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
