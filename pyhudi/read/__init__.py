"""read package."""
