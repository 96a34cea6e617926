-- botgate's Redis store: publish.
local function publish(version_key, channel, changes)
  for _, what in ipairs(changes) do
    local v = redis.call('INCR', version_key)
    redis.call('PUBLISH', channel, '{"version":' .. v .. ',"what":' .. what .. '}')
  end
end
