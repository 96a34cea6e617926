-- botgate's Redis store: shared secret.
local stored = redis.call('GET', KEYS[3])
if stored then return stored end
redis.call('SET', KEYS[3], ARGV[1])
return ARGV[1]
