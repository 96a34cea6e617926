-- botgate's Redis store: claim deliveries.
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local claimed = {}
for _, id in ipairs(ids) do
  local stored = redis.call('GET', ARGV[4] .. id)
  if stored then
    redis.call('ZADD', KEYS[3], ARGV[2], id)
    table.insert(claimed, stored)
  else
    redis.call('ZREM', KEYS[3], id)
  end
end
return claimed
