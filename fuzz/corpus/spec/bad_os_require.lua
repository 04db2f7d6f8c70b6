local ok = pcall(function() return os.execute("true") end)
local m = require("os")
return {}
