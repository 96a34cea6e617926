-- botgate's Redis store: once. A write runs once per operation: KEYS[#KEYS] names the
-- operation, and a retry of it (its first reply lost with the connection) gets the
-- first run's reply instead of running again. Refusals are not kept: a refused write
-- changed nothing a retry would repeat differently.
local function once(body, keep_ms)
  local operation = KEYS[#KEYS]
  local saved = redis.call('GET', operation)
  if saved == 'nil' then return nil end
  if saved then return cjson.decode(saved) end
  local reply = body()
  if type(reply) == 'table' and reply.err then return reply end
  if reply == nil then
    redis.call('SET', operation, 'nil', 'PX', keep_ms)
  else
    redis.call('SET', operation, cjson.encode(reply), 'PX', keep_ms)
  end
  return reply
end
