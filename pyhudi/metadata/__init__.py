"""Hudi's metadata table (``.hoodie/metadata``): what it records, read without listing storage."""
