"""What a catalog holds for a Hudi table, and the calls a catalog client answers.

The entries mirror the Hive metastore's objects (a table with a storage descriptor, partitions
with their own) because AWS Glue took the same shape; each client translates them to its wire
form (thrift structs for the metastore, boto3 dictionaries for Glue) and back, so the sync logic
(:mod:`pyhudi.sync.tool`) compares and writes entries without knowing which catalog it talks to.

A client counts the calls it makes by API name (:attr:`CatalogClient.calls`): the sync's
promise is a bounded number of calls per commit, and the count is how tests and the benchmark
hold it to that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from pyhudi.errors import HudiError

__all__ = ["CatalogClient", "Column", "HudiCatalogError", "PartitionEntry", "StorageEntry", "TableEntry"]


class HudiCatalogError(HudiError):
    """A catalog call failed (the metastore or Glue refused it or could not be reached). The data
    commit it followed stays committed; the next sync catches the catalog up."""


@dataclass(frozen=True)
class Column:
    """One column: its name, its Hive type string (lower case, no spaces: ``struct<a:int>``) and a
    comment (Hudi registers ``""``)."""

    name: str
    type: str
    comment: str = ""


@dataclass(frozen=True)
class StorageEntry:
    """Where and how the data is stored: a table's or partition's storage descriptor (Glue's
    ``StorageDescriptor``)."""

    columns: tuple[Column, ...]
    location: str
    input_format: str
    output_format: str
    serde: str
    serde_parameters: Mapping[str, str] = field(default_factory=dict)

    def at(self, location: str) -> StorageEntry:
        """This descriptor at another location (a partition's copy of its table's)."""
        return replace(self, location=location)


@dataclass(frozen=True)
class TableEntry:
    """A catalog table. ``parameters`` are the table properties (``spark.sql.sources.*``,
    ``last_commit_time_sync``, ``EXTERNAL``...); ``table_type`` is ``EXTERNAL_TABLE`` as Hudi
    registers it, or ``MANAGED_TABLE`` with ``create_managed_table``."""

    database: str
    name: str
    storage: StorageEntry
    partition_keys: tuple[Column, ...]
    parameters: Mapping[str, str]
    table_type: str = "EXTERNAL_TABLE"
    owner: str = ""


@dataclass(frozen=True)
class PartitionEntry:
    """A catalog partition: its values (one per partition key, in key order) and its location."""

    values: tuple[str, ...]
    location: str


class CatalogClient(Protocol):
    """The calls the sync makes. Every method may raise :class:`HudiCatalogError`.

    Batching is the client's business: each ``*_partitions`` method takes any number of entries
    and splits them within the catalog's limits (Glue: 100 per create or update, 25 per delete;
    the metastore: one call each).
    """

    #: ``"hms"`` or ``"glue"``: entries differ slightly between them (Glue's table parameter
    #: ``hudi.metadata-listing-enabled``, ``s3://`` locations)
    kind: str
    #: calls made so far, by API name (``GetTable``, ``BatchCreatePartition``, ``get_table``, ...)
    calls: Counter[str]

    def database_exists(self, database: str) -> bool:
        """Whether the database exists."""
        ...

    def create_database(self, database: str, *, description: str) -> None:
        """Create the database (an existing one is not an error)."""
        ...

    def get_table(self, database: str, name: str) -> TableEntry | None:
        """The table's entry, or None if the catalog has no such table."""
        ...

    def create_table(self, table: TableEntry) -> None:
        """Register a new table."""
        ...

    def update_table(self, table: TableEntry, *, cascade: bool) -> None:
        """Replace the table's entry with ``table`` (columns, storage, parameters) in one call; with
        ``cascade`` the metastore also applies a column change to every partition."""
        ...

    def drop_table(self, database: str, name: str) -> None:
        """Remove the table's entry (its data is not touched); an absent table is not an error."""
        ...

    def get_partitions(self, table: TableEntry, values: Sequence[tuple[str, ...]] | None = None
                       ) -> dict[tuple[str, ...], str]:
        """Location of each partition of the table by its values: all of them (``values`` None), or
        those of ``values`` that exist."""
        ...

    def add_partitions(self, table: TableEntry, partitions: Sequence[PartitionEntry]) -> None:
        """Register partitions with the table's storage descriptor at their locations; one that
        exists already is not an error (a re-run sync adds it again)."""
        ...

    def update_partitions(self, table: TableEntry, partitions: Sequence[PartitionEntry]) -> None:
        """Point existing partitions at new locations (and the table's current descriptor)."""
        ...

    def drop_partitions(self, table: TableEntry, values: Sequence[tuple[str, ...]]) -> None:
        """Remove partitions (their data is not touched); one that is absent is not an error."""
        ...
