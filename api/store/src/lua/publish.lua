-- botgate's Redis store: functions every script has (publish, at_limit).
local function publish(version_key, channel, changes)
  for _, what in ipairs(changes) do
    local v = redis.call('INCR', version_key)
    redis.call('PUBLISH', channel, '{"version":' .. v .. ',"what":' .. what .. '}')
  end
end

-- The error reply refusing one more of `what` to `partner` when the sorted set `held`
-- counts `limit` ('' for none) already; nil when there is room.
local function at_limit(held, limit, partner, what)
  if limit == '' then return nil end
  local count = redis.call('ZCARD', held)
  if count < tonumber(limit) then return nil end
  return redis.error_reply('ATLIMIT partner ' .. partner .. ' holds ' .. count .. ' ' .. what .. ', the most allowed')
end
