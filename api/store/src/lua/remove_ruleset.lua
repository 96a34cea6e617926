-- botgate's Redis store: forget a pushed version, its shadow results, and its bytes when
-- no other version has them; the name's state revision moves, so a change read before
-- (an activation of this version) is refused as stale. KEYS[3] the versions, KEYS[4]
-- the states, KEYS[5] their revisions, KEYS[6] the revision of them all, KEYS[7] and
-- KEYS[8] the version's shadow counts and samples; ARGV[1] the name, ARGV[2] the
-- version, ARGV[3] the prefix of the bytes' keys, ARGV[4] the version's key
-- (name@version). 1 removed, 0 not stored.
local state = redis.call('HGET', KEYS[4], ARGV[1])
if state then
  state = cjson.decode(state)
  local shadow = state.shadow
  if state.active == ARGV[2] or (type(shadow) == 'table' and shadow.version == ARGV[2]) then
    return redis.error_reply('CONFLICT rule set ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' is in service')
  end
end
local key = ARGV[4]
local stored = redis.call('HGET', KEYS[3], key)
if not stored then return 0 end
local sha256 = cjson.decode(stored).sha256
redis.call('HDEL', KEYS[3], key)
redis.call('DEL', KEYS[7], KEYS[8])
if state then
  redis.call('HSET', KEYS[5], ARGV[1], redis.call('INCR', KEYS[6]))
end
for _, other in ipairs(redis.call('HVALS', KEYS[3])) do
  if cjson.decode(other).sha256 == sha256 then return 1 end
end
redis.call('DEL', ARGV[3] .. sha256)
return 1
