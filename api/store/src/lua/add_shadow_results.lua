-- botgate's Redis store: add a gateway's shadow results. KEYS[3] the counts (a hash by
-- `active -> shadow`), KEYS[4] the samples (a list, newest first); ARGV[1] the samples
-- kept, ARGV[2] the number of counts, then each pair and its count, then the samples,
-- oldest first.
local pairs = tonumber(ARGV[2])
for i = 0, pairs - 1 do
  redis.call('HINCRBY', KEYS[3], ARGV[3 + 2 * i], ARGV[4 + 2 * i])
end
local first = 3 + 2 * pairs
for i = first, #ARGV do
  redis.call('LPUSH', KEYS[4], ARGV[i])
end
redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[1]) - 1)
return 1
