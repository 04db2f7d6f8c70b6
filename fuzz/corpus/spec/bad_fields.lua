return { op = "gemv", contraints = {}, bytes = 3, strategies = { [2] = {} } }
