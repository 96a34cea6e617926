-- botgate's Redis store: update partner.
local stored = redis.call('GET', KEYS[3])
if not stored then return redis.error_reply('NOTFOUND partner ' .. ARGV[5]) end
local partner = cjson.decode(stored)
if ARGV[1] == 'key_sha256' and partner.key_sha256 ~= ARGV[2] then
  redis.call('DEL', ARGV[4] .. partner.key_sha256)
  redis.call('SET', ARGV[4] .. ARGV[2], ARGV[5])
end
if ARGV[1] == 'frame_origins' then
  partner[ARGV[1]] = cjson.decode(ARGV[2])
else
  partner[ARGV[1]] = ARGV[2]
end
local written = cjson.encode(partner)
redis.call('SET', KEYS[3], written)
publish(KEYS[1], KEYS[2], {ARGV[3]})
return written
