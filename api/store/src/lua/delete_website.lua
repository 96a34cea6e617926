-- botgate's Redis store: delete website.
local current = redis.call('HMGET', KEYS[3], 'partner', 'website', 'revision')
if not current[1] then return redis.error_reply('NOTFOUND website ' .. ARGV[2]) end
if ARGV[4] ~= '' and tonumber(current[3]) ~= tonumber(ARGV[4]) then
  return redis.error_reply('STALE website ' .. ARGV[2])
end
local website = cjson.decode(current[2])
local user = website.user_id
release_hosts(ARGV[1], website, current[1])
release_callbacks(ARGV[1], current[1], website, current[3])
forget_traffic(ARGV[1], ARGV[2])
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', ARGV[1] .. 'websites-of:' .. current[1], ARGV[2])
redis.call('ZREM', ARGV[1] .. 'websites-of:' .. current[1] .. ':' .. user, ARGV[2])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return 1
