-- botgate's Redis store: remove ephemeral.
redis.call('DEL', KEYS[3])
return 1
