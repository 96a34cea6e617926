-- botgate's Redis store: finish delivery.
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
