-- botgate's Redis store: put partner.
local old = redis.call('GET', KEYS[3])
if old then
  local hash = cjson.decode(old).key_sha256
  redis.call('DEL', ARGV[4] .. hash)
end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('SET', KEYS[4], ARGV[2])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return 1
