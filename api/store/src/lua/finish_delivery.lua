-- botgate's Redis store: finish delivery.
-- KEYS[3] the delivery, KEYS[4] the due index. ARGV: id, key prefix.
local stored = redis.call('GET', KEYS[3])
if stored then
  local partner = cjson.decode(stored).partner
  redis.call('SREM', ARGV[2] .. 'deliveries-of:' .. partner, ARGV[1])
end
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
