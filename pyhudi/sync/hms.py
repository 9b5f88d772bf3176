"""The Hive metastore as a catalog: :class:`HiveMetastoreClient` speaks its thrift API directly.

Hudi's ``HiveSyncTool`` in ``hms`` mode goes through Hive's ``IMetaStoreClient``; pyhudi has no JVM
on this path, so it sends the same thrift calls itself (:mod:`pyhudi.sync.thrift`). Field ids come
from Hive's ``hive_metastore.thrift`` and are the same in every Hive release since 2.x, so one
client serves Hive 2.3 (Spark's built-in metastore), 3.x and 4.x servers for these calls.

Each method is one thrift call, or one per ``batch_size`` partitions, so a sync's cost is
predictable: ``add_partitions_req``, ``alter_partitions`` and ``drop_partitions_req`` each take a
whole batch, unlike Hudi's one ``dropPartition`` per partition.
"""

from __future__ import annotations

import getpass
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from pyhudi.sync.catalog import Column, HudiCatalogError, PartitionEntry, StorageEntry, TableEntry
from pyhudi.sync.thrift import (
    BOOL,
    I16,
    I32,
    STRING,
    STRUCT,
    Field,
    ListOf,
    MapOf,
    ThriftClient,
    ThriftTransportError,
    string_map,
)

__all__ = ["HiveMetastoreClient", "escape_path_name", "parse_uris", "partition_name", "read_table", "table_fields"]

_T = TypeVar("_T")
_STRINGS = ListOf(STRING)
_STRING_MAP = MapOf(STRING, STRING)
_STRUCTS = ListOf(STRUCT)
#: Hive's name for a partition whose value is null or empty.
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: Characters Hive escapes in partition names (``FileUtils.escapePathName``, not on Windows).
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list('"#%\'*/:=?\\\x7f{[]^'))

# The declared exceptions of each method, by result field id (field 0 is the return value).
_EXCEPTIONS: dict[str, dict[int, str]] = {
    "get_database": {1: "NoSuchObjectException", 2: "MetaException"},
    "create_database": {1: "AlreadyExistsException", 2: "InvalidObjectException", 3: "MetaException"},
    "get_table": {1: "MetaException", 2: "NoSuchObjectException"},
    "create_table": {1: "AlreadyExistsException", 2: "InvalidObjectException", 3: "MetaException",
                     4: "NoSuchObjectException"},
    "alter_table_with_environment_context": {1: "InvalidOperationException", 2: "MetaException"},
    "drop_table": {1: "NoSuchObjectException", 2: "MetaException"},
    "get_partitions": {1: "NoSuchObjectException", 2: "MetaException"},
    "get_partitions_by_names": {1: "MetaException", 2: "NoSuchObjectException"},
    "add_partitions_req": {1: "InvalidObjectException", 2: "AlreadyExistsException", 3: "MetaException"},
    "alter_partitions": {1: "InvalidOperationException", 2: "MetaException"},
    "drop_partitions_req": {1: "NoSuchObjectException", 2: "MetaException"},
    "get_all_tables": {1: "MetaException"},
}


class _RemoteError(HudiCatalogError):
    """A declared metastore exception (``NoSuchObjectException``...) as answered by the server."""

    def __init__(self, message: str, kind: str, detail: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail  # the server's own message


def escape_path_name(value: str) -> str:
    """A partition value as Hive writes it in a partition name: the characters Hive escapes as
    ``%XX`` (upper-case hex), everything else (spaces, non-ASCII) kept; empty → Hive's default
    partition name."""
    if not value:
        return DEFAULT_PARTITION
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """The metastore's name of a partition, ``k1=v1/k2=v2``: what it stores and looks partitions up
    by (key names lower-cased, both sides escaped as Hive does)."""
    return "/".join(f"{escape_path_name(k.lower())}={escape_path_name(v)}" for k, v in zip(keys, values))


def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _os_user() -> str:
    """The user Hudi registers as owner: the process's user (Hadoop's UGI short name on the JVM)."""
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry and no USER variable (some containers)
        return os.environ.get("HADOOP_USER_NAME", "hudi")


def parse_uris(uri: str) -> list[tuple[str, int]]:
    """``thrift://h1:9083,thrift://h2:9083`` (Hive's ``hive.metastore.uris``) as (host, port) pairs."""
    out = []
    for part in uri.split(","):
        part = part.strip()
        if not part:
            continue
        rest = part.split("://", 1)[1] if "://" in part else part
        if "://" in part and not part.lower().startswith("thrift://"):
            raise HudiCatalogError(f"metastore URI {part!r} is not thrift://host:port; "
                                   "set hoodie.datasource.hive_sync.metastore.uris to thrift://host:port")
        host, _, port = rest.rstrip("/").rpartition(":")
        if not host or not port.isdigit():
            raise HudiCatalogError(f"metastore URI {part!r} has no host:port; expected thrift://host:9083")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise HudiCatalogError("no metastore URI given; expected thrift://host:9083")
    return out


# ---------------------------------------------------------------------------------------------
# Entries ↔ thrift structs


def _columns(columns: Sequence[Column]) -> list[list[Field]]:
    # lower case as the metastore stores them: it compares partition keys case-sensitively on alter
    return [[Field(1, STRING, c.name.lower()), Field(2, STRING, c.type), Field(3, STRING, c.comment)] for c in columns]


def _storage(sd: StorageEntry) -> list[Field]:
    """A StorageDescriptor as Hudi fills it: no buckets, no sort, uncompressed, serde unnamed."""
    serde = [Field(2, STRING, sd.serde), Field(3, _STRING_MAP, dict(sd.serde_parameters))]
    return [Field(1, _STRUCTS, _columns(sd.columns)), Field(2, STRING, sd.location),
            Field(3, STRING, sd.input_format), Field(4, STRING, sd.output_format), Field(5, BOOL, False),
            Field(6, I32, -1), Field(7, STRUCT, serde), Field(8, _STRINGS, []), Field(9, _STRUCTS, []),
            Field(10, _STRING_MAP, {}), Field(12, BOOL, False)]


def table_fields(table: TableEntry, create_time: int) -> list[Field]:
    """A ``Table`` struct's fields for ``table`` (owner ``""`` → the OS user)."""
    return [Field(1, STRING, table.name), Field(2, STRING, table.database),
            Field(3, STRING, table.owner or _os_user()), Field(4, I32, create_time), Field(5, I32, 0),
            Field(6, I32, 0), Field(7, STRUCT, _storage(table.storage)),
            Field(8, _STRUCTS, _columns(table.partition_keys)), Field(9, _STRING_MAP, dict(table.parameters)),
            Field(12, STRING, table.table_type)]


def _partition(table: TableEntry, values: Sequence[str], location: str, create_time: int = 0) -> list[Field]:
    # a fresh descriptor per partition (Hudi 0.14 shared one object and sent the last location for all)
    return [Field(1, _STRINGS, list(values)), Field(2, STRING, table.database), Field(3, STRING, table.name),
            Field(4, I32, create_time), Field(5, I32, 0), Field(6, STRUCT, _storage(table.storage.at(location))),
            Field(7, _STRING_MAP, {})]


def _read_columns(items: Sequence[Mapping[int, Any]] | None) -> tuple[Column, ...]:
    return tuple(Column(c.get(1, ""), c.get(2, ""), c.get(3) or "") for c in items or ())


def _read_storage(sd: Mapping[int, Any]) -> StorageEntry:
    serde = sd.get(7) or {}
    return StorageEntry(columns=_read_columns(sd.get(1)), location=sd.get(2) or "", input_format=sd.get(3) or "",
                        output_format=sd.get(4) or "", serde=serde.get(2) or "",
                        serde_parameters=string_map(serde.get(3)))


def read_table(t: Mapping[int, Any]) -> TableEntry:
    """The entry of a decoded ``Table`` struct (fields it does not know are ignored)."""
    return TableEntry(database=t.get(2, ""), name=t.get(1, ""), storage=_read_storage(t.get(7) or {}),
                      partition_keys=_read_columns(t.get(8)), parameters=string_map(t.get(9)),
                      table_type=t.get(12) or "", owner=t.get(3) or "")


# ---------------------------------------------------------------------------------------------
# The client


class HiveMetastoreClient:
    """A :class:`~pyhudi.sync.catalog.CatalogClient` for a Hive metastore at ``uri``.

    ``uri`` is Hive's ``hive.metastore.uris``: one ``thrift://host:port`` or a comma-separated list,
    tried in order until one connects. The connection opens at the first call and is reused;
    ``timeout`` (seconds) bounds connecting and each call. Partition lists longer than
    ``batch_size`` go in several calls. Table and database names are lower case in the
    metastore, as Hive folds them.
    """

    kind = "hms"

    def __init__(self, uri: str = "thrift://localhost:9083", *, timeout: float = 60.0,
                 batch_size: int = 1000) -> None:
        self.uri = uri
        self.batch_size = batch_size
        self.calls: Counter[str] = Counter()
        self._client = ThriftClient(parse_uris(uri), timeout=timeout)
        self._create_times: dict[tuple[str, str], int] = {}
        # creation times of the partitions last read, so that an update does not reset them to 0
        self._partition_times: dict[tuple[str, str], dict[tuple[str, ...], int]] = {}

    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        self._client.close()

    def __enter__(self) -> HiveMetastoreClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, args: Sequence[Field], target: str) -> Any:
        """One counted call: its return value, or a :class:`_RemoteError` for a declared exception.
        ``target`` (database or database.table) goes into error messages."""
        self.calls[method] += 1
        try:
            result = self._client.call(method, args)
        except ThriftTransportError as e:
            raise HudiCatalogError(f"Hive metastore call {method} for {target} failed: {e}. Check that the "
                                   f"metastore at {self.uri} is running and reachable "
                                   "(hoodie.datasource.hive_sync.metastore.uris)") from e
        except HudiCatalogError as e:  # TApplicationException
            raise HudiCatalogError(f"Hive metastore {self.uri} failed {method} for {target}: {e}; "
                                   "see the metastore's log") from e
        for fid, value in result.items():
            if fid != 0 and value is not None:
                kind = _EXCEPTIONS.get(method, {}).get(fid, f"exception #{fid}")
                message = (value.get(1) or "" if isinstance(value, dict) else str(value)).rstrip(".")
                raise _RemoteError(f"Hive metastore {self.uri} refused {method} for {target}: {kind}: {message}",
                                   kind, message)
        return result.get(0)

    def _fail(self, e: _RemoteError, what: str) -> HudiCatalogError:
        return HudiCatalogError(f"{e}. {what}")

    # -- databases --------------------------------------------------------------------------

    def database_exists(self, database: str) -> bool:
        """Whether the database exists (``get_database``; NoSuchObjectException → False)."""
        try:
            self._call("get_database", [Field(1, STRING, database)], database)
        except _RemoteError as e:
            if e.kind == "NoSuchObjectException":
                return False
            raise self._fail(e, "Check the metastore's log") from e
        return True

    def create_database(self, database: str, *, description: str) -> None:
        """Create the database at the metastore's default location; one that exists is not an error
        (another writer may have created it since we looked)."""
        db = [Field(1, STRING, database), Field(2, STRING, description), Field(4, _STRING_MAP, {}),
              Field(6, STRING, _os_user()), Field(7, I32, 1)]  # ownerType USER
        try:
            self._call("create_database", [Field(1, STRUCT, db)], database)
        except _RemoteError as e:
            if e.kind != "AlreadyExistsException":
                raise self._fail(e, "Create the database yourself or check the metastore user's rights") from e

    # -- tables -----------------------------------------------------------------------------

    def get_table(self, database: str, name: str) -> TableEntry | None:
        """The table's entry, or None (NoSuchObjectException). Its parameters are the metastore's
        as they are, including what the metastore adds itself (``transient_lastDdlTime``)."""
        try:
            t = self._call("get_table", [Field(1, STRING, database), Field(2, STRING, name)], f"{database}.{name}")
        except _RemoteError as e:
            if e.kind == "NoSuchObjectException":
                return None
            raise self._fail(e, "Check the metastore's log") from e
        if t.get(4) is not None:
            self._create_times[(database.lower(), name.lower())] = int(t[4])
        return read_table(t)

    def create_table(self, table: TableEntry) -> None:
        """Register the table (``create_table``); owner ``""`` registers the OS user, as Hudi does.
        The metastore creates the location's folder if it is missing."""
        now = int(time.time())
        target = f"{table.database}.{table.name}"
        try:
            self._call("create_table", [Field(1, STRUCT, table_fields(table, now))], target)
        except _RemoteError as e:
            if e.kind == "AlreadyExistsException":
                hint = "The table exists already: update it instead"
            elif e.kind == "NoSuchObjectException" or e.detail.lower() == table.database.lower():
                hint = f"Create database {table.database} first"  # Hive 2.3: InvalidObject naming the database
            else:
                hint = "Check the entry's types and location against the metastore's log"
            raise self._fail(e, hint) from e
        self._create_times[(table.database.lower(), table.name.lower())] = now

    def update_table(self, table: TableEntry, *, cascade: bool) -> None:
        """Replace the table's entry in one ``alter_table_with_environment_context``; ``cascade``
        sets ``CASCADE=true`` so the metastore also gives every partition the new columns.

        The entry has no creation time: the one last read by :meth:`get_table` (or written by
        :meth:`create_table`) on this client is sent back so it does not change."""
        target = f"{table.database}.{table.name}"
        create_time = self._create_times.get((table.database.lower(), table.name.lower()), 0)
        context = [Field(1, _STRING_MAP, {"CASCADE": "true"} if cascade else {})]
        args = [Field(1, STRING, table.database), Field(2, STRING, table.name),
                Field(3, STRUCT, table_fields(table, create_time)), Field(4, STRUCT, context)]
        try:
            self._call("alter_table_with_environment_context", args, target)
        except _RemoteError as e:
            raise self._fail(e, "Check that the table exists and that the change (column types, "
                                "renames) is one the metastore accepts") from e

    def drop_table(self, database: str, name: str) -> None:
        """Remove the table's entry, keeping its data; an absent table is not an error."""
        try:
            self._call("drop_table", [Field(1, STRING, database), Field(2, STRING, name), Field(3, BOOL, False)],
                       f"{database}.{name}")
        except _RemoteError as e:
            if e.kind != "NoSuchObjectException":
                raise self._fail(e, "Check the metastore's log") from e
        self._create_times.pop((database.lower(), name.lower()), None)
        self._partition_times.pop((database.lower(), name.lower()), None)

    def list_tables(self, database: str) -> list[str]:
        """The names of the database's tables (``get_all_tables``)."""
        try:
            return list(self._call("get_all_tables", [Field(1, STRING, database)], database) or [])
        except _RemoteError as e:
            raise self._fail(e, "Check the metastore's log") from e

    # -- partitions -------------------------------------------------------------------------

    def _names(self, table: TableEntry, values: Sequence[tuple[str, ...]]) -> list[str]:
        keys = [c.name for c in table.partition_keys]
        for v in values:
            if len(v) != len(keys):
                raise HudiCatalogError(f"partition values {v!r} of {table.database}.{table.name} do not match "
                                       f"its partition keys {keys}: give one value per key")
        return [partition_name(keys, v) for v in values]

    def get_partitions(self, table: TableEntry, values: Sequence[tuple[str, ...]] | None = None
                       ) -> dict[tuple[str, ...], str]:
        """Location by values of all partitions (``get_partitions``), or of those of ``values`` that
        exist (``get_partitions_by_names``, ``batch_size`` names per call; absent names are just
        missing from the answer)."""
        target = f"{table.database}.{table.name}"
        db_tbl = [Field(1, STRING, table.database), Field(2, STRING, table.name)]
        found: list[Mapping[int, Any]] = []
        try:
            if values is None:
                found = self._call("get_partitions", [*db_tbl, Field(3, I16, -1)], target) or []
            else:
                for names in _chunks(self._names(table, values), self.batch_size):
                    found += self._call("get_partitions_by_names", [*db_tbl, Field(3, _STRINGS, list(names))],
                                        target) or []
        except _RemoteError as e:
            raise self._fail(e, "Check that the table exists") from e
        times = self._partition_times.setdefault((table.database.lower(), table.name.lower()), {})
        if values is None:
            times.clear()
        out = {}
        for p in found:
            key = tuple(p.get(1) or ())
            out[key] = (p.get(6) or {}).get(2) or ""
            times[key] = int(p.get(4) or 0)
        return out

    def add_partitions(self, table: TableEntry, partitions: Sequence[PartitionEntry]) -> None:
        """Register partitions (``add_partitions_req``, ``ifNotExists``: existing ones are skipped),
        each with its own copy of the table's descriptor at its location. The metastore creates
        missing partition folders."""
        target = f"{table.database}.{table.name}"
        self._names(table, [p.values for p in partitions])
        for chunk in _chunks(partitions, self.batch_size):
            parts = [_partition(table, p.values, p.location) for p in chunk]
            request = [Field(1, STRING, table.database), Field(2, STRING, table.name), Field(3, _STRUCTS, parts),
                       Field(4, BOOL, True), Field(5, BOOL, False)]
            try:
                self._call("add_partitions_req", [Field(1, STRUCT, request)], target)
            except _RemoteError as e:
                raise self._fail(e, "Check that the table exists and the values match its partition keys") from e

    def update_partitions(self, table: TableEntry, partitions: Sequence[PartitionEntry]) -> None:
        """Point existing partitions at new locations with the table's current descriptor
        (``alter_partitions``); every partition must exist. The metastore replaces the whole
        partition: its creation time is sent back as :meth:`get_partitions` last read it (else 0),
        and the metastore recomputes its file statistics (``numFiles``, ``totalSize``) by listing
        the new location."""
        target = f"{table.database}.{table.name}"
        self._names(table, [p.values for p in partitions])
        times = self._partition_times.get((table.database.lower(), table.name.lower()), {})
        for chunk in _chunks(partitions, self.batch_size):
            parts = [_partition(table, p.values, p.location, times.get(tuple(p.values), 0)) for p in chunk]
            args = [Field(1, STRING, table.database), Field(2, STRING, table.name), Field(3, _STRUCTS, parts)]
            try:
                self._call("alter_partitions", args, target)
            except _RemoteError as e:
                raise self._fail(e, "Add partitions that do not exist instead of updating them") from e

    def drop_partitions(self, table: TableEntry, values: Sequence[tuple[str, ...]]) -> None:
        """Remove partitions by name (``drop_partitions_req``, ``ifExists``, data kept); absent ones
        are skipped."""
        target = f"{table.database}.{table.name}"
        for names in _chunks(self._names(table, values), self.batch_size):
            request = [Field(1, STRING, table.database), Field(2, STRING, table.name),
                       Field(3, STRUCT, [Field(1, _STRINGS, list(names))]), Field(4, BOOL, False),
                       Field(5, BOOL, True), Field(8, BOOL, False)]
            try:
                self._call("drop_partitions_req", [Field(1, STRUCT, request)], target)
            except _RemoteError as e:
                raise self._fail(e, "Check that the table exists") from e
