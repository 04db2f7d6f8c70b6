local function cdiv(a, b) return (a + b - 1) // b end
return { op = "gemv", bytes = function(s) return 2.5 * s.M * s.K end,
  strategies = {
    { name = "a", template = "gemv/a.cu", kernel = "a",
      params = { { "TP_W", { 1, 2, 4 } }, { "TP_V", { 8, 3 } } },
      constraints = {
        { "divides", function(p, s) if s.K % p.TP_V ~= 0 then return "K % TP_V" end return true end },
        { "nil_prunes", function(p, s) return p.TP_W < 4 or nil end },
        { "false_prunes", function(p, s) return s.arch >= 90 and s.dtype == "bf16" end },
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_W), s.M, 1 } end,
      block = function(p, s) return { 32, p.TP_W } end,
      smem = function(p, s) return 1024 * p.TP_W end },
    { name = "b", template = "gemv/b.cu", kernel = "b", params = {}, constraints = {},
      grid = function(p, s) return { 1.0 } end, block = function(p, s) return { 1024, 1, 1 } end } } }
