-- botgate's Redis store: claim deliveries, shared among partners as
-- `ClaimShares::allocate` says.
-- KEYS[3] `partners-due`. ARGV: now ms, the lease's end, limit, key prefix, the most
-- per partner ('' for none), then pairs of a partner and the attempts it holds.
local prefix, now, limit = ARGV[4], ARGV[1], tonumber(ARGV[3])
adopt_former(prefix)
local per_partner = math.huge
if ARGV[5] ~= '' then per_partner = tonumber(ARGV[5]) end
local held, holding_partners = {}, 0
for i = 6, #ARGV, 2 do
  held[ARGV[i]] = tonumber(ARGV[i + 1])
  holding_partners = holding_partners + 1
end
-- The partners with something due, oldest due first: past `limit + holding_partners`
-- of them, `limit` with room were already seen.
local partners = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0,
  limit + holding_partners)
local room, holding, taken = {}, {}, {}
for i, partner in ipairs(partners) do
  holding[i] = held[partner] or 0
  local due = redis.call('ZCOUNT', prefix .. 'deliveries-due:' .. partner, '-inf', now)
  -- Listed as due with nothing due (its index changed by hand): listed right.
  if due == 0 then reindex_partner(prefix, partner) end
  room[i] = math.min(math.max(per_partner - holding[i], 0), due)
  taken[i] = 0
end
-- One slot at a time to the partner holding fewest, the oldest due among equals.
for _ = 1, limit do
  local best
  for i = 1, #partners do
    if taken[i] < room[i] and (best == nil or holding[i] < holding[best]) then best = i end
  end
  if best == nil then break end
  taken[best] = taken[best] + 1
  holding[best] = holding[best] + 1
end
-- Moving each claimed id's score to the lease's end is the claim: pairs of when it was
-- due and the stored JSON.
local claimed = {}
for i, partner in ipairs(partners) do
  if taken[i] > 0 then
    local index = prefix .. 'deliveries-due:' .. partner
    local scored = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
      taken[i])
    for j = 1, #scored, 2 do
      local stored = redis.call('GET', prefix .. 'delivery:' .. scored[j])
      if stored then
        redis.call('ZADD', index, ARGV[2], scored[j])
        table.insert(claimed, scored[j + 1])
        table.insert(claimed, stored)
      else
        redis.call('ZREM', index, scored[j])
      end
    end
    reindex_partner(prefix, partner)
  end
end
return claimed
