-- tell: wake waiter w, queued for a lock, with msg: a hand-off
-- ("p FENCE TIME PX") or '' (its turn to try). inbox is what the lock's
-- asks hash holds under the field w .. '\n' (inboxOf): the channel of
-- w's Locker, which all of that Locker's queued waiters share, when w's
-- attempts named one; the message then starts with w's token and a space.
-- Without one (a waiter that listens on a channel of its own, or a
-- version before the inboxes) it goes to w's own channel, the lock's
-- release channel .. ':' .. w.
local function tell(channel, w, msg, inbox)
  if inbox then
    redis.call('PUBLISH', inbox, w .. ' ' .. msg)
  else
    redis.call('PUBLISH', channel .. ':' .. w, msg)
  end
end

-- inboxOf reads the inbox of queued waiter w from the asks hash (false
-- when it named none).
local function inboxOf(asks, w)
  return redis.call('HGET', asks, w .. '\n')
end

