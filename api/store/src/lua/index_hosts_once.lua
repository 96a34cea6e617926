-- botgate's Redis store: index hosts once.
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local prefix = ARGV[1]
for _, domain in ipairs(redis.call('ZRANGE', prefix .. 'websites', 0, -1)) do
  local fields = redis.call('HMGET', prefix .. 'website:' .. domain, 'partner', 'website')
  if fields[1] then
    redis.call('ZADD', prefix .. 'domain-tree', 0, reversed(domain) .. ' ' .. fields[1])
    redis.call('ZADD', prefix .. 'domain-tree-of:' .. fields[1], 0, reversed(domain))
    for _, host in ipairs(hosts_of(cjson.decode(fields[2]))) do
      redis.call('SET', prefix .. 'host:' .. host, domain, 'NX')
    end
  end
end
redis.call('SET', KEYS[3], '1')
return 1
