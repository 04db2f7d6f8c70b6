"""atk: the autotune runtime from Python (placeholder for local runs of atk.report; the package's own __init__ replaces it)."""
