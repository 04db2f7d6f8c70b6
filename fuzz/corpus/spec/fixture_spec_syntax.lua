-- spec_syntax.lua: a syntax error on line 5 (the doubled comma).
return {
  op = "gemv",
  strategies = {
    { name = "x" ,,
  },
}
