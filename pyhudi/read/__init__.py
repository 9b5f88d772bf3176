"""Reading file slices: merging a base file with its log blocks (no Spark)."""
