-- botgate's Redis store: update website.
local current = redis.call('HMGET', KEYS[3], 'revision', 'website', 'partner')
if not current[1] then return redis.error_reply('NOTFOUND website ' .. ARGV[4]) end
if tonumber(current[1]) ~= tonumber(ARGV[1]) then return redis.error_reply('STALE website ' .. ARGV[4]) end
local old = cjson.decode(current[2])
if old.user_id ~= ARGV[5] then
  return redis.error_reply('CONFLICT website ' .. ARGV[4] .. ' belongs to another user')
end
local claims = cjson.decode(ARGV[7])
local refused = check_hosts(ARGV[6], ARGV[4], current[3], claims, false)
if refused then return redis.error_reply(refused) end
release_hosts(ARGV[6], old, current[3])
claim_hosts(ARGV[6], ARGV[4], current[3], claims)
local revision = next_revision(ARGV[6], KEYS[1])
redis.call('HSET', KEYS[3], 'revision', revision, 'website', ARGV[2])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return {revision, current[3]}
