"""commit package."""
