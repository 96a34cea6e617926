-- botgate's Redis store: replace a user's key.
local user = redis.call('GET', KEYS[3])
if not user then return redis.error_reply('NOTFOUND user ' .. ARGV[4]) end
if cjson.decode(user).api_key ~= ARGV[1] then return redis.error_reply('STALE user ' .. ARGV[4]) end
if redis.call('EXISTS', KEYS[5]) == 1 then return redis.error_reply('CONFLICT a user with this key') end
redis.call('DEL', KEYS[4])
redis.call('SET', KEYS[5], ARGV[5])
redis.call('SET', KEYS[3], ARGV[2])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return 1
