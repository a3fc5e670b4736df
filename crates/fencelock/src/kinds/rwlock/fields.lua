-- The read-write lock's hash: these fields, plus one field per holder or waiter (see scan.lua).
local RW_FIELDS = {'kind'}
