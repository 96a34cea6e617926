-- botgate's Redis store: put ephemeral.
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
return 1
