-- spec_loop.lua: an infinite loop at top level, on line 4.
local n = 0
while true do
  n = n + 1
end
