-- botgate's Redis store: add traffic.
-- KEYS[3] minute bucket, KEYS[4] hour bucket, KEYS[5] events, KEYS[6] the website.
-- ARGV: the owner's partner and user id, minute ttl ms, hour ttl ms, entries per top
-- list, events kept, n, n counter (field, count) pairs, m, m top-list (field, count)
-- pairs, events (JSON).
-- A top list's size is kept in the hour bucket's field `#` and the list's prefix.
local minute, hour, events = KEYS[3], KEYS[4], KEYS[5]
-- Counts recorded for another owner (the website deleted since, or created again by
-- someone else) are not kept. A record that cannot be read has no owner.
local stored = redis.call('HMGET', KEYS[6], 'partner', 'website')
if stored[1] ~= ARGV[1] or not stored[2] then return 0 end
local read, website = pcall(cjson.decode, stored[2])
if not read or type(website) ~= 'table' or website['user_id'] ~= ARGV[2] then return 0 end
local i = 8
local counters = tonumber(ARGV[7])
for _ = 1, counters do
  redis.call('HINCRBY', minute, ARGV[i], ARGV[i + 1])
  redis.call('HINCRBY', hour, ARGV[i], ARGV[i + 1])
  i = i + 2
end
local tops = tonumber(ARGV[i])
i = i + 1
local limit = tonumber(ARGV[5])
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
if counters > 0 then redis.call('PEXPIRE', minute, ARGV[3]) end
if counters + tops > 0 then redis.call('PEXPIRE', hour, ARGV[4]) end
if i <= #ARGV then
  for j = i, #ARGV do redis.call('LPUSH', events, ARGV[j]) end
  redis.call('LTRIM', events, 0, tonumber(ARGV[6]) - 1)
  redis.call('PEXPIRE', events, ARGV[4])
end
return 1
