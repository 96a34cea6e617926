-- botgate's Redis store: put delivery.
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[3])
return 1
