"""table package."""
