-- botgate's Redis store: put partner (ARGV[5] `new`: only if there is none of the name).
local old = redis.call('GET', KEYS[3])
if old and ARGV[5] == 'new' then
  return redis.error_reply('CONFLICT partner ' .. ARGV[2])
end
if old then
  local hash = cjson.decode(old).key_sha256
  redis.call('DEL', ARGV[4] .. hash)
end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('SET', KEYS[4], ARGV[2])
publish(KEYS[1], KEYS[2], {ARGV[3]})
return 1
