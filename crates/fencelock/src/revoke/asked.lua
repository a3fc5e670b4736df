-- Whether a hold was asked to let go: the largest fence a request covers.
-- KEYS[1] the request key
-- Reply: that fence as text, or 0 when no request stands
return redis.call('get', KEYS[1]) or 0
