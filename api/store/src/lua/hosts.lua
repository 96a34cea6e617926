-- botgate's Redis store: hosts.
local function reversed(domain)
  local labels = {}
  for label in string.gmatch(domain, '[^.]+') do table.insert(labels, 1, label) end
  return table.concat(labels, '.')
end
local function hosts_of(website)
  local hosts = {website.domain}
  for _, sub in ipairs(website.subdomain or {}) do
    table.insert(hosts, sub .. '.' .. website.domain)
  end
  return hosts
end
-- Whether a website of another partner than `partner` is under the domain reversed as
-- `rev`. `domain-tree-of:{partner}` is the partner's own part of `domain-tree`, so that
-- two range counts answer without reading the websites under the domain. A release
-- without these trees may have written since (a rolling upgrade, a rollback), leaving a
-- partner's tree short or long: so the first look at a range in a minute walks it and
-- mends the partner's tree from it, and the looks after it in that minute trust the
-- counts, a difference counting as another partner's (refused until the next walk).
local function foreign_below(prefix, rev, partner)
  local lo, hi = '[' .. rev .. '.', '(' .. rev .. '/'
  local all = redis.call('ZLEXCOUNT', prefix .. 'domain-tree', lo, hi)
  if all == 0 then return false end
  local own_key = prefix .. 'domain-tree-of:' .. partner
  local walk = redis.call('SET', prefix .. 'domain-tree-walked:' .. partner .. ':' .. rev, '1', 'NX', 'PX', 60000)
  if not walk then return redis.call('ZLEXCOUNT', own_key, lo, hi) ~= all end
  local own, foreign = {}, false
  for _, member in ipairs(redis.call('ZRANGEBYLEX', prefix .. 'domain-tree', lo, hi)) do
    local space = string.find(member, ' ', 1, true)
    if string.sub(member, space + 1) == partner then
      own[string.sub(member, 1, space - 1)] = true
    else
      foreign = true
    end
  end
  for _, member in ipairs(redis.call('ZRANGEBYLEX', own_key, lo, hi)) do
    if not own[member] then redis.call('ZREM', own_key, member) end
  end
  for member in pairs(own) do redis.call('ZADD', own_key, 0, member) end
  return foreign
end
local function check_hosts(prefix, domain, partner, claims, tree)
  for _, claim in ipairs(claims) do
    local owner = redis.call('GET', prefix .. 'host:' .. claim[1])
    if owner and owner ~= domain then return 'HOSTTAKEN ' .. claim[2] .. ' taken ' .. claim[1] end
  end
  if not tree then return nil end
  local from = 1
  while true do
    local at = string.find(domain, '.', from, true)
    if not at then break end
    local owner = redis.call('HGET', prefix .. 'website:' .. string.sub(domain, at + 1), 'partner')
    if owner and owner ~= partner then return 'HOSTTAKEN domain under ' .. domain end
    from = at + 1
  end
  if foreign_below(prefix, reversed(domain), partner) then
    return 'HOSTTAKEN domain above ' .. domain
  end
  return nil
end
local function claim_hosts(prefix, domain, partner, claims)
  for _, claim in ipairs(claims) do redis.call('SET', prefix .. 'host:' .. claim[1], domain) end
  redis.call('ZADD', prefix .. 'domain-tree', 0, reversed(domain) .. ' ' .. partner)
  redis.call('ZADD', prefix .. 'domain-tree-of:' .. partner, 0, reversed(domain))
end
local function release_hosts(prefix, website, partner)
  for _, host in ipairs(hosts_of(website)) do
    local key = prefix .. 'host:' .. host
    if redis.call('GET', key) == website.domain then redis.call('DEL', key) end
  end
  redis.call('ZREM', prefix .. 'domain-tree', reversed(website.domain) .. ' ' .. partner)
  redis.call('ZREM', prefix .. 'domain-tree-of:' .. partner, reversed(website.domain))
end
-- Forgets a website's statistics and latest requests (kept under its domain, in
-- buckets numbered by minute and hour and expired by time), so that a later website
-- of the same name starts with none.
local function forget_traffic(prefix, domain)
  local now = redis.call('TIME')
  local minute = math.floor(tonumber(now[1]) / 60)
  local hour = math.floor(minute / 60)
  local base = prefix .. 'traffic:' .. domain
  redis.call('DEL', prefix .. 'events:' .. domain)
  for m = minute - 121, minute + 1 do redis.call('DEL', base .. ':m:' .. string.format('%d', m)) end
  for h = hour - 193, hour + 1 do redis.call('DEL', base .. ':h:' .. string.format('%d', h)) end
end
-- The revision of a website write: above every revision any website ever had (the
-- version bounds those written before the counter existed), so a domain's revisions
-- never repeat across its deletion and creation again.
local function next_revision(prefix, version_key)
  local counter = prefix .. 'website-revision'
  local revision = redis.call('INCR', counter)
  local version = tonumber(redis.call('GET', version_key) or '0')
  if revision <= version then
    revision = version + 1
    redis.call('SET', counter, revision)
  end
  return revision
end
-- The `callbackUrl`s the partner's websites in `setup` hold, one member of the sorted
-- set `held-callbacks:{partner}` each: `{domain}\n{revision}\n{url}`. The revision
-- tells apart a member whose website was written since by a release without the set.
local function held_member(domain, revision, url)
  return domain .. '\n' .. string.format('%d', tonumber(revision)) .. '\n' .. url
end
local function hold_callbacks(prefix, partner, domain, revision, callbacks)
  for _, url in ipairs(callbacks) do
    redis.call('ZADD', prefix .. 'held-callbacks:' .. partner, 0, held_member(domain, revision, url))
  end
end
-- Whether a decoded website record has what `release_hosts` and `release_callbacks`
-- read, in the types they read it in (so that they cannot fail halfway through a script,
-- whose earlier writes Redis would keep).
local function releasable(website)
  if type(website) ~= 'table' or type(website.domain) ~= 'string' then return false end
  local function strings(list)
    if list == nil then return true end
    if type(list) ~= 'table' then return false end
    for _, item in ipairs(list) do
      if type(item) ~= 'string' then return false end
    end
    return true
  end
  if not strings(website.subdomain) then return false end
  local pending = website.pending
  return type(pending) ~= 'table' or type(pending.callbacks) ~= 'table' or strings(pending.callbacks)
end
local function release_callbacks(prefix, partner, website, revision)
  local pending = website.pending
  if type(pending) ~= 'table' or type(pending.callbacks) ~= 'table' then return end
  for _, url in ipairs(pending.callbacks) do
    redis.call('ZREM', prefix .. 'held-callbacks:' .. partner, held_member(website.domain, revision, url))
  end
end
-- The error reply refusing `more` held callbacks to `partner` past `limit` ('' for
-- none); nil when there is room. Before refusing, members whose website has been
-- written since they were added are dropped (at most once a minute a partner: a
-- partner at its bound sending change after change costs no scan each).
local function held_callbacks_full(prefix, partner, more, limit)
  if limit == '' or more <= 0 then return nil end
  local key = prefix .. 'held-callbacks:' .. partner
  if redis.call('ZCARD', key) + more <= tonumber(limit) then return nil end
  local scan = redis.call('SET', prefix .. 'held-callbacks-checked:' .. partner, '1', 'NX', 'PX', 60000)
  for _, member in ipairs(scan and redis.call('ZRANGE', key, 0, -1) or {}) do
    local domain, revision = string.match(member, '^([^\n]*)\n([^\n]*)\n')
    local current = domain and redis.call('HGET', prefix .. 'website:' .. domain, 'revision')
    if not current or tonumber(current) ~= tonumber(revision) then redis.call('ZREM', key, member) end
  end
  local held = redis.call('ZCARD', key)
  if held + more <= tonumber(limit) then return nil end
  return redis.error_reply('FULL partner ' .. partner .. ' has ' .. held ..
    ' `callbackUrl`s waiting for its websites in `setup`, the most allowed')
end
