-- botgate's Redis store: lease.
local current = redis.call('GET', KEYS[3])
if current and current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
return 1
