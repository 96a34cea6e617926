-- botgate's Redis store: finish delivery.
-- KEYS[3] the delivery. ARGV: id, key prefix.
local prefix = ARGV[2]
local stored = redis.call('GET', KEYS[3])
if stored then
  local partner = cjson.decode(stored).partner
  redis.call('ZREM', prefix .. 'deliveries-due:' .. partner, ARGV[1])
  reindex_partner(prefix, partner)
  -- A former release's index of it, during an upgrade.
  redis.call('SREM', prefix .. 'deliveries-of:' .. partner, ARGV[1])
end
redis.call('DEL', KEYS[3])
redis.call('ZREM', prefix .. 'deliveries', ARGV[1])
return 1
