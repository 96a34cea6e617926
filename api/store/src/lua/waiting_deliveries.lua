-- botgate's Redis store: waiting deliveries. KEYS[3] the partner's waiting ids.
-- ARGV: the bound, the key prefix, the partner. Counted up to the bound; at the bound,
-- ids whose delivery is gone (removed by hand) are dropped first, at most once a
-- minute a partner.
local most = tonumber(ARGV[1])
local waiting = redis.call('ZCARD', KEYS[3])
if waiting >= most and redis.call('SET', ARGV[2] .. 'deliveries-pruned:' .. ARGV[3], '1', 'NX', 'PX', 60000) then
  drop_gone(ARGV[2], ARGV[3])
  waiting = redis.call('ZCARD', KEYS[3])
end
return math.min(waiting, most)
