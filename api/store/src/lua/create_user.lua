-- botgate's Redis store: create user.
if redis.call('EXISTS', KEYS[3]) == 0 then return redis.error_reply('NOTFOUND partner ' .. ARGV[5]) end
if redis.call('EXISTS', KEYS[4]) == 1 then return redis.error_reply('CONFLICT user ' .. ARGV[4]) end
if redis.call('EXISTS', KEYS[5]) == 1 then return redis.error_reply('CONFLICT a user with this key') end
local full = at_limit(KEYS[6], ARGV[6], ARGV[5], 'users')
if full then return full end
redis.call('SET', KEYS[4], ARGV[1])
redis.call('SET', KEYS[5], ARGV[2])
redis.call('ZADD', KEYS[6], 0, ARGV[4])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return 1
