"""Catalog sync (issue 31): what a catalog (Hive metastore, AWS Glue) must learn about a table.

This package is catalog-independent: it derives partition changes, partition values and
locations from the table's timeline and file listing; the catalog clients build on it.
"""
