-- botgate's Redis store: delete user, a batch of websites (ARGV[5]) at a time; the user
-- with the last batch. Answers {done (1 or 0), the domains deleted}.
local user = redis.call('GET', KEYS[3])
if not user then return redis.error_reply('NOTFOUND user ' .. ARGV[2]) end
if cjson.decode(user).api_key ~= ARGV[4] then return redis.error_reply('STALE user ' .. ARGV[2]) end
local batch = tonumber(ARGV[5])
local domains = redis.call('ZRANGE', KEYS[5], 0, batch)
local done = #domains <= batch
if not done then table.remove(domains) end
-- Every record of the batch is read before the first write: Redis keeps what a script
-- wrote before it failed, so one that cannot be read refuses the whole batch.
local records = {}
for i, domain in ipairs(domains) do
  local stored = redis.call('HMGET', ARGV[1] .. 'website:' .. domain, 'partner', 'website', 'revision')
  if stored[1] then
    local read, website = pcall(cjson.decode, stored[2])
    if not read or not releasable(website) then
      return redis.error_reply('CORRUPT website:' .. domain)
    end
    records[i] = {partner = stored[1], website = website, revision = stored[3]}
  end
end
local changes = {}
for i, domain in ipairs(domains) do
  local record = records[i]
  if record then
    release_hosts(ARGV[1], record.website, record.partner)
    release_callbacks(ARGV[1], record.partner, record.website, record.revision)
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
