"""write package."""
