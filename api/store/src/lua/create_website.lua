-- botgate's Redis store: create website.
if redis.call('EXISTS', KEYS[3]) == 0 then return redis.error_reply('NOTFOUND user ' .. ARGV[4]) end
if redis.call('EXISTS', KEYS[4]) == 1 then return redis.error_reply('CONFLICT website ' .. ARGV[5]) end
local claims = cjson.decode(ARGV[7])
local refused = check_hosts(ARGV[6], ARGV[5], ARGV[1], claims, true)
if refused then return redis.error_reply(refused) end
local full = at_limit(KEYS[6], ARGV[8], ARGV[1], 'websites')
if full then return full end
local callbacks = cjson.decode(ARGV[9])
full = held_callbacks_full(ARGV[6], ARGV[1], #callbacks, ARGV[10])
if full then return full end
claim_hosts(ARGV[6], ARGV[5], ARGV[1], claims)
forget_traffic(ARGV[6], ARGV[5])
local revision = next_revision(ARGV[6], KEYS[1])
redis.call('HSET', KEYS[4], 'partner', ARGV[1], 'user', ARGV[4], 'revision', revision, 'website', ARGV[2])
hold_callbacks(ARGV[6], ARGV[1], ARGV[5], revision, callbacks)
redis.call('ZADD', KEYS[5], 0, ARGV[5])
redis.call('ZADD', KEYS[6], 0, ARGV[5])
redis.call('ZADD', KEYS[7], 0, ARGV[5])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return revision
