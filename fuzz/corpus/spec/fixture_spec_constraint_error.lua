-- spec_constraint_error.lua: loads fine; its constraint fails on line 10.
return {
  op = "gemv",
  strategies = {
    {
      name = "s", template = "gemv/s.cu", kernel = "s",
      params = { { "TP_X", {1, 2} } },
      constraints = {
        { "calls_nil", function(p, s)
            return s.no_such_field.x > p.TP_X
          end },
      },
      grid = function(p, s) return { 1 } end,
      block = function(p, s) return { 32 } end,
    },
  },
  bytes = function(s) return 1 end,
}
