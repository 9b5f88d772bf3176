"""Catalog sync: the Hive metastore and AWS Glue learn a table as Hudi's sync tools register it.

:mod:`~pyhudi.sync.entries` builds the entries, :mod:`~pyhudi.sync.partitions` decides which
partitions changed since a catalog's last synced instant, :mod:`~pyhudi.sync.tool` runs one sync
per catalog table with the calls held to what changed, and the clients speak each catalog's
protocol behind :class:`~pyhudi.sync.catalog.CatalogClient`: :mod:`~pyhudi.sync.hms` (thrift,
:mod:`~pyhudi.sync.thrift`) and :mod:`~pyhudi.sync.glue` (boto3).
"""
