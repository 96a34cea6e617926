-- botgate's Redis store: the outbox's indexes, for the scripts that change it.
-- `deliveries-due:{partner}` holds a partner's waiting ids scored by when each is due;
-- `partners-due` each partner with any, scored by when its first is due.

-- Moves the partner's entry in `partners-due` to when its first delivery is due.
local function reindex_partner(prefix, partner)
  local first = redis.call('ZRANGE', prefix .. 'deliveries-due:' .. partner, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', prefix .. 'partners-due', first[2], partner)
  else
    redis.call('ZREM', prefix .. 'partners-due', partner)
  end
end

-- Drops from the partner's waiting ids those whose delivery is gone (removed other than
-- by finishing it: by hand, say); the partner's entry in `partners-due` is left as is.
local function drop_gone(prefix, partner)
  local index = prefix .. 'deliveries-due:' .. partner
  for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    if redis.call('EXISTS', prefix .. 'delivery:' .. id) == 0 then redis.call('ZREM', index, id) end
  end
end

-- Moves what gateways of a former release indexed (ids in `deliveries`, and the
-- partners' `deliveries-of:` sets) into the partners' indexes, 500 at a time: during an
-- upgrade, gateways of both releases share the store. An id whose delivery is gone or
-- cannot be read is dropped.
local function adopt_former(prefix)
  local former = prefix .. 'deliveries'
  local scored = redis.call('ZRANGE', former, 0, 499, 'WITHSCORES')
  if #scored == 0 then return end
  local touched = {}
  for i = 1, #scored, 2 do
    local id = scored[i]
    redis.call('ZREM', former, id)
    local stored = redis.call('GET', prefix .. 'delivery:' .. id)
    local ok, delivery = pcall(cjson.decode, stored or '')
    if stored and ok and type(delivery) == 'table' and type(delivery.partner) == 'string' then
      redis.call('ZADD', prefix .. 'deliveries-due:' .. delivery.partner, scored[i + 1], id)
      touched[delivery.partner] = true
    end
  end
  for partner in pairs(touched) do
    redis.call('DEL', prefix .. 'deliveries-of:' .. partner)
    reindex_partner(prefix, partner)
  end
end
