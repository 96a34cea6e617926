-- botgate's Redis store: update website.
local current = redis.call('HMGET', KEYS[3], 'revision', 'website', 'partner')
if not current[1] then return redis.error_reply('NOTFOUND website ' .. ARGV[4]) end
if tonumber(current[1]) ~= tonumber(ARGV[1]) then return redis.error_reply('STALE website ' .. ARGV[4]) end
local old = cjson.decode(current[2])
if old.user_id ~= ARGV[5] then
  return redis.error_reply('CONFLICT website ' .. ARGV[4] .. ' belongs to another user')
end
local claims = cjson.decode(ARGV[7])
local refused = check_hosts(ARGV[6], ARGV[4], current[3], claims, false)
if refused then return redis.error_reply(refused) end
local callbacks = cjson.decode(ARGV[8])
local held_before = 0
if type(old.pending) == 'table' and type(old.pending.callbacks) == 'table' then
  held_before = #old.pending.callbacks
end
local full = held_callbacks_full(ARGV[6], current[3], #callbacks - held_before, ARGV[9])
if full then return full end
release_hosts(ARGV[6], old, current[3])
claim_hosts(ARGV[6], ARGV[4], current[3], claims)
release_callbacks(ARGV[6], current[3], old, current[1])
local revision = next_revision(ARGV[6], KEYS[1])
redis.call('HSET', KEYS[3], 'revision', revision, 'website', ARGV[2])
hold_callbacks(ARGV[6], current[3], ARGV[4], revision, callbacks)
publish(KEYS[1], KEYS[2], {ARGV[3]})
return {revision, current[3]}
