-- botgate's Redis store: push a rule component's version. KEYS[3] the versions (a hash
-- by name@version), KEYS[4] its bytes (written before, by SHA-256); ARGV[1] name@version,
-- ARGV[2] the record, ARGV[3] the SHA-256, ARGV[4] 1 when the record is signed. 1 stored,
-- 0 stored already (a signature coming with the same bytes is kept).
local stored = redis.call('HGET', KEYS[3], ARGV[1])
if stored then
  local old = cjson.decode(stored)
  if old.sha256 ~= ARGV[3] then
    return redis.error_reply('CONFLICT rule set ' .. ARGV[1] .. ' with other content')
  end
  if type(old.signature) ~= 'string' and ARGV[4] == '1' then
    redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
  end
  return 0
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  return redis.error_reply('NOTFOUND the bytes of rule set ' .. ARGV[1])
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
