-- botgate's Redis store: put delivery.
-- KEYS[3] the delivery, KEYS[4] the partner's waiting ids by when each is due.
-- ARGV: JSON, due ms, id, only if present ('1'), the partner's limit ('' for none),
-- what is full (for the error), the key prefix, the partner.
local present = redis.call('EXISTS', KEYS[3]) == 1
if ARGV[4] == '1' and not present then return 0 end
local function full()
  return redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[5])
end
if not present and ARGV[5] ~= '' and full() then
  -- Ids whose delivery is gone are dropped before the partner is refused.
  drop_gone(ARGV[7], ARGV[8])
  if full() then return redis.error_reply('FULL ' .. ARGV[6]) end
end
-- The same id under another partner (never made so, but kept right): out of its index.
if present then
  local ok, was = pcall(cjson.decode, redis.call('GET', KEYS[3]))
  if ok and type(was) == 'table' and type(was.partner) == 'string' and was.partner ~= ARGV[8] then
    redis.call('ZREM', ARGV[7] .. 'deliveries-due:' .. was.partner, ARGV[3])
    reindex_partner(ARGV[7], was.partner)
  end
end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[3])
reindex_partner(ARGV[7], ARGV[8])
return 1
