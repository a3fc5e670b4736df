-- The server's clock in microseconds, as text: where a scheduled job's tick is read from (every
-- host reads the one server's, whatever its own says). KEYS[1]: the resource's fence key (only
-- to route the call to the node that serves its hash tag; nothing is read or written).

return clock_text()
