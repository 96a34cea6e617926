-- botgate's Redis store: delete user, a batch of websites (ARGV[5]) at a time; the user
-- with the last batch. Answers {done (1 or 0), the domains deleted}.
local user = redis.call('GET', KEYS[3])
if not user then return redis.error_reply('NOTFOUND user ' .. ARGV[2]) end
if cjson.decode(user).api_key ~= ARGV[4] then return redis.error_reply('STALE user ' .. ARGV[2]) end
local batch = tonumber(ARGV[5])
local domains = redis.call('ZRANGE', KEYS[5], 0, batch)
local done = #domains <= batch
if not done then table.remove(domains) end
local changes = {}
for _, domain in ipairs(domains) do
  local stored = redis.call('HMGET', ARGV[1] .. 'website:' .. domain, 'partner', 'website', 'revision')
  if stored[1] then
    local website = cjson.decode(stored[2])
    release_hosts(ARGV[1], website, stored[1])
    release_callbacks(ARGV[1], stored[1], website, stored[3])
  end
  forget_traffic(ARGV[1], domain)
  redis.call('DEL', ARGV[1] .. 'website:' .. domain)
  redis.call('ZREM', KEYS[5], domain)
  redis.call('ZREM', KEYS[6], domain)
  redis.call('ZREM', KEYS[7], domain)
  table.insert(changes, '{"kind":"website","domain":' .. cjson.encode(domain) .. '}')
end
if done then
  redis.call('DEL', KEYS[5])
  redis.call('DEL', KEYS[3])
  redis.call('DEL', KEYS[8])
  redis.call('ZREM', KEYS[4], ARGV[2])
  table.insert(changes, ARGV[3])
end
publish(KEYS[1], KEYS[2], changes)
return {done and 1 or 0, domains}
