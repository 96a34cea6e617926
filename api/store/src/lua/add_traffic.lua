-- botgate's Redis store: add traffic.
-- KEYS[3] minute bucket, KEYS[4] hour bucket, KEYS[5] events, KEYS[6] the website.
-- ARGV: the owner's partner and user id, minute ttl ms, hour ttl ms, entries per top
-- list, events kept, n, n counter (field, count) pairs, m, m top-list (field, count)
-- pairs, events (JSON).
-- A top list's size is kept in the hour bucket's field `#` and the list's prefix.
local minute, hour, events = KEYS[3], KEYS[4], KEYS[5]
-- Counts recorded for another owner (the website deleted since, or created again by
-- someone else) are not kept. The owner is read from the record's `partner` and `user`
-- fields, not from its JSON (a website's may be large, and every gateway adds counts
-- for every website it served every few seconds); a record written by a release
-- without `user` is read once and given it. A record that cannot be read has no owner.
local stored = redis.call('HMGET', KEYS[6], 'partner', 'user')
if stored[1] ~= ARGV[1] then return 0 end
local user = stored[2]
if not user then
  local json = redis.call('HGET', KEYS[6], 'website')
  if not json then return 0 end
  local read, website = pcall(cjson.decode, json)
  if not read or type(website) ~= 'table' or type(website['user_id']) ~= 'string' then return 0 end
  user = website['user_id']
  redis.call('HSET', KEYS[6], 'user', user)
end
if user ~= ARGV[2] then return 0 end
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
