-- botgate's Redis store: count.
local count = redis.call('INCR', KEYS[3])
if count == 1 then redis.call('PEXPIREAT', KEYS[3], ARGV[1]) end
return count
