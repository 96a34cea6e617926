-- botgate's Redis store: a rule set's state, if still at the revision the caller read.
-- KEYS[3] the states (a hash by name), KEYS[4] their revisions (a hash by name), KEYS[5]
-- the revision of them all; ARGV[1] the name, ARGV[2] the expected revision (0: none),
-- ARGV[3] the state. The new revision.
local current = tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0')
if current ~= tonumber(ARGV[2]) then
  return redis.error_reply('STALE rule set ' .. ARGV[1] .. "'s state")
end
local revision = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[4], ARGV[1], revision)
return revision
