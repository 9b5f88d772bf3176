"""``HudiTable``: a table's properties, timeline, file groups and schema in one handle.

Loading reads ``hoodie.properties`` and lists the timeline; file listings are made on demand
(``file_system_view``) so opening a large table stays cheap. Everything here is plain Python and
pyarrow: the CLI and tests use it without a SparkSession.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pyhudi.config import properties as P
from pyhudi.config.properties import (
    TableConfig,
    load_table_config,
    read_table_config,
    store_table_config,
    update_table_config,
)
from pyhudi.config.support import INDEX_DEFS_FILE, INDEX_DEFS_PATH
from pyhudi.errors import (
    HudiError,
    HudiInstantNotFoundError,
    HudiTableNotFoundError,
    HudiTablePropertiesError,
    HudiUnsupportedError,
)
from pyhudi.io.avro_schema import table_arrow_schema
from pyhudi.io.base_file import read_footer
from pyhudi.metadata import column_stats, record_index
from pyhudi.metadata.files import FILES_PARTITION, FileListing, MdtSlice
from pyhudi.metadata.keys import file_group_id, file_group_indexes
from pyhudi.metadata.table import MetadataTable, usable_partitions
from pyhudi.storage import Storage, resolve_options
from pyhudi.table.fs_view import FileSystemView
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.timeline.instant import Instant, parse_instant_file
from pyhudi.timeline.timeline import META_FOLDER, Timeline

log = logging.getLogger("pyhudi")

#: operation types of table services (they rewrite files in the schema they find)
_SERVICE_OPERATIONS = frozenset({"COMPACT", "CLUSTER", "LOG_COMPACT"})


@dataclass(frozen=True)
class CommitSummary:
    """One completed write, as ``pyhudi show commits`` lists it."""

    instant: Instant
    metadata: CommitMetadata

    @property
    def files_added(self) -> int:
        return sum(1 for s in self.metadata.write_stats() if s.prevCommit in ("null", None, ""))

    @property
    def files_updated(self) -> int:
        return sum(1 for s in self.metadata.write_stats() if s.prevCommit not in ("null", None, ""))


def has_timeline(storage: Storage) -> bool:
    """Whether ``.hoodie`` holds instants: active ones (in either timeline layout) or archived ones.

    Such a folder is a table whatever happened to its ``hoodie.properties``; only a folder without
    any may be set up as a new table."""
    for folder in (META_FOLDER, f"{META_FOLDER}/timeline"):
        if any(parse_instant_file(info.name) is not None for info in storage.list_files(folder)):
            return True
    return any(storage.list_files(folder) for folder in (f"{META_FOLDER}/archived", f"{META_FOLDER}/timeline/history"))


def as_storage(path: str | Storage, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """The storage of a table path: a given :class:`Storage` as it is, a string with its store
    settings resolved from ``storage_options`` and the environment."""
    if isinstance(path, Storage):
        return path
    return Storage(path, resolve_options(path, storage_options))


def table_exists(storage: Storage) -> bool:
    """Whether the storage holds a table: a config, its backup, or a timeline."""
    return (storage.exists(P.PROPERTIES_FILE) or storage.exists(P.BACKUP_FILE)) or has_timeline(storage)


def _is_record_schema(schema: str | None) -> bool:
    """Whether a commit's recorded schema is a table schema (an Avro record): Apache Hudi records
    none, or ``"null"``, for operations that write no records, such as ``delete_partition``."""
    if not schema:
        return False
    try:
        parsed = json.loads(schema)
    except ValueError:
        return True  # let the schema reader name what is wrong with it
    return isinstance(parsed, dict) and parsed.get("type") == "record"


class HudiTable:
    """An existing Hudi table at ``path``: a local path, a URI (``s3a://bucket/t``, ``gs://``,
    ``abfss://``, ``hdfs://``) or a :class:`~pyhudi.storage.Storage` that carries its store settings.
    ``storage_options`` (Hadoop ``fs.s3a.*`` keys or ``aws_*`` keys; see
    :mod:`pyhudi.storage.options`) configure the store when ``path`` is a string.

    A path with a timeline but no usable ``hoodie.properties`` (nor backup) is a
    :class:`~pyhudi.errors.HudiTablePropertiesError`, not "no table": writing there as if it were
    new would replace the table's settings with the writer's options."""

    def __init__(self, path: str | Storage, *, storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage = as_storage(path, storage_options)
        # read hoodie.properties straight away: asking first whether the table exists costs a
        # request more on an object store; only a missing file takes the longer way (its backup,
        # a timeline without it)
        config = read_table_config(self.storage)
        if config is None:
            if not table_exists(self.storage):
                raise HudiTableNotFoundError(
                    f"{self.storage.uri()} is not a Hudi table: {self.storage.full(P.PROPERTIES_FILE)} does not exist "
                    "(write to it with pyhudi.write first, or check the path)")
            config = load_table_config(self.storage)
        self.config: TableConfig = config
        self.timeline = Timeline(self.storage, layout_version=self.config.layout_version, utc=self.config.utc_timeline)
        self._listing_cache: tuple[tuple, FileListing | None] | None = None
        self._mdt_layout: int | None = None  # the metadata table's timeline layout, once read

    @property
    def path(self) -> str:
        return self.storage.base_uri

    @property
    def base_path(self) -> str:
        return self.storage.base_path

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def table_type(self) -> str:
        return self.config.table_type

    @property
    def properties(self) -> Mapping[str, str]:
        return self.config.props

    @staticmethod
    def exists(path: str | Storage, *, storage_options: Mapping[str, Any] | None = None) -> bool:
        """Whether ``path`` holds a table (readable or not: opening it tells)."""
        return table_exists(as_storage(path, storage_options))

    @classmethod
    def open_if_exists(cls, path: str | Storage, *,
                       storage_options: Mapping[str, Any] | None = None) -> HudiTable | None:
        """The table at ``path``, None where there is none: one read of ``hoodie.properties`` where
        asking :meth:`exists` first and then opening it reads it after a probe."""
        try:
            return cls(path, storage_options=storage_options)
        except HudiTableNotFoundError:
            return None

    @classmethod
    def create(cls, path: str | Storage, props: Mapping[str, str], *,
               storage_options: Mapping[str, Any] | None = None) -> HudiTable:
        """Lay out a new table: the meta folder, its sub-folders and ``hoodie.properties``; only
        where there is no table yet (no config, backup or timeline)."""
        storage = as_storage(path, storage_options)
        if table_exists(storage):
            raise HudiTablePropertiesError(
                f"{storage.uri()} holds a table already ({P.PROPERTIES_FILE}, its backup or a timeline): not creating "
                "one over it; open it with HudiTable, or pick another path")
        archive = "/timeline/history" if props.get(P.LAYOUT_VERSION, "1") == "2" else "/archived"
        for folder in ("", "/.aux", "/.aux/.bootstrap/.partitions", "/.aux/.bootstrap/.fileids",
                       "/.schema", "/.temp", archive):
            storage.mkdirs(META_FOLDER + folder)
        store_table_config(storage, props)
        return cls(storage)

    def reload(self) -> HudiTable:
        self.config = load_table_config(self.storage)
        self.timeline.reload()
        return self

    def update_properties(self, changes: Mapping[str, str | None]) -> None:
        """Set (None: remove) table properties, holding the table lock, with Hudi's backup protocol
        (:func:`~pyhudi.config.properties.update_table_config`); changes apply to the config as
        stored, not as this handle last read it."""
        self.config = update_table_config(self.storage, changes)

    # -- views ---------------------------------------------------------------------------------
    def file_system_view(self, *, as_of: str | None = None, partitions: list[str] | None = None,
                         include_replaced: bool = False, completed_by: str | None = None) -> FileSystemView:
        """File groups from the metadata table's file list when the table has a usable one, else
        from a storage listing (``as_of``, ``completed_by``: see :class:`FileSystemView`)."""
        return FileSystemView(self.storage, self.timeline, as_of=as_of, partitions=partitions,
                              include_replaced=include_replaced, listing=self.metadata_listing(),
                              completed_by=completed_by)

    def has_metadata_table(self) -> bool:
        """Whether the table declares a usable metadata table (``files`` partition)."""
        return FILES_PARTITION in usable_partitions(self.config.props) and MetadataTable(self.storage).exists()

    def metadata_column_ranges(self, columns: Iterable[str], schema: pa.Schema) -> dict[str, dict[str, Any]] | None:
        """file name -> column -> range from the metadata table's column_stats partition, for
        ``columns``; None when the table has no usable one (then footers serve)."""
        if column_stats.PARTITION not in usable_partitions(self.config.props) or self.metadata_listing() is None:
            return None
        try:
            records = self._metadata_table().read(column_stats.PARTITION, self.timeline,
                                                       key_prefixes=column_stats.key_prefixes(columns))
        except (FileNotFoundError, HudiError) as exc:
            log.warning("cannot read the column stats of %s (%s); reading footers", self.path, exc)
            return None
        return column_stats.column_ranges(records, columns, schema)

    def check_writable(self, action: str, *, merges: bool = False) -> None:
        """Refuse ``action`` (a write or a table service) before it writes a file when pyhudi does
        not write this table: what its properties say (:meth:`TableConfig.check_writable`), and a
        record index its ``index.json`` declares partitioned (Hudi 1.x's non-global record index,
        whose file groups are per data partition: pyhudi keeps one global index, and its updates
        would go to the wrong file groups)."""
        self.config.check_writable(action, merges=merges)
        if record_index.PARTITION not in self.config.metadata_partitions or self.config.version < 8:
            return
        defs = self.index_definitions()
        if defs is None:
            raise HudiUnsupportedError(f"{action} refused: table {self.name} has an index definitions file "
                                       f"{self.index_definitions_path} that is not Hudi's JSON; nothing was written")
        options = (defs.get(record_index.PARTITION) or {}).get("indexOptions") or {}
        if str(options.get("isPartitioned", "false")).strip().lower() == "true":
            raise HudiUnsupportedError(
                f"{action} refused: table {self.name} has a partitioned record index ({self.index_definitions_path}: "
                "isPartitioned=true), which pyhudi does not maintain (it keeps one global record index); nothing "
                "was written. Write this table with Apache Hudi's own Spark bundle")

    @property
    def index_definitions_path(self) -> str:
        """Where a table of version 8 on keeps its index definitions (``hoodie.table.index.defs.path``)."""
        return self.config.props.get(INDEX_DEFS_PATH) or INDEX_DEFS_FILE

    def index_definitions(self) -> dict[str, dict[str, Any]] | None:
        """Index name -> definition from :attr:`index_definitions_path` (empty when there is no such
        file); None when the file is not Hudi's index definitions JSON."""
        raw = self.storage.read_bytes_or_none(self.index_definitions_path)
        if raw is None:
            return {}
        try:
            defs = json.loads(raw.decode("utf-8")).get("indexDefinitions") or {}
        except (ValueError, AttributeError):
            return None
        if not isinstance(defs, dict) or not all(isinstance(d, dict) for d in defs.values()):
            return None
        return defs

    def record_index_slices(self) -> list[MdtSlice] | None:
        """The latest slice of every file group of the metadata table's ``record_index``, as
        readers see them; None when the table keeps no usable one (not declared, or the metadata
        table behind the timeline)."""
        if record_index.PARTITION not in usable_partitions(self.config.props) or self.metadata_listing() is None:
            return None
        return self._metadata_table().slices(record_index.PARTITION, self.timeline) or None

    def record_locations(self, keys: Iterable[str]) -> dict[str, tuple[str, str]] | None:
        """key -> (partition path, file id) of those of ``keys`` the record index holds (a key it
        does not hold is in no committed file group); None when the table has no usable record
        index: none kept, behind the timeline, unreadable, or not one global index of file groups
        ``record-index-0000-0`` on (Hudi 1.x's partitioned record index names its groups by data
        partition). Each index file group is read for its keys only, in the blocks that can hold
        them."""
        try:
            slices = self.record_index_slices()
            if slices is None:
                return None
            by_group = {s.file_id: s for s in slices}
            if sorted(by_group) != [file_group_id(record_index.FILE_GROUP_PREFIX, i) for i in range(len(slices))]:
                log.warning("the record index of %s is not one global index of numbered file groups; not using it",
                            self.path)
                return None
            wanted = sorted(set(keys))
            groups = file_group_indexes(pa.array(wanted, pa.string()), len(slices)).tolist()
            found: dict[str, tuple[str, str]] = {}
            for group in sorted(set(groups)):
                found.update(record_index.lookup(self.storage, by_group[file_group_id(record_index.FILE_GROUP_PREFIX,
                                                                                      group)],
                                                 [k for k, g in zip(wanted, groups) if g == group]))
        except (FileNotFoundError, HudiError) as exc:  # compacted and cleaned while being read, damaged
            log.warning("cannot read the record index of %s (%s); not using it", self.path, exc)
            return None
        return found

    def _metadata_table(self) -> MetadataTable:
        """A fresh handle of the metadata table, its timeline to be listed anew; its layout (from
        its ``hoodie.properties``, which never changes it) read once per handle of this table."""
        return MetadataTable(self.storage, layout_version=self._mdt_layout)

    def metadata_listing(self) -> FileListing | None:
        """The data files as the metadata table lists them; None (with a warning) when the table
        has no usable metadata table or it is behind the timeline, so callers list storage."""
        if FILES_PARTITION not in usable_partitions(self.config.props):
            return None
        mdt = self._metadata_table()  # a new handle lists its timeline once, when first asked
        try:
            mdt_state = tuple(mdt.timeline.instant_files)
            self._mdt_layout = mdt.timeline.layout_version
        except HudiError as exc:
            log.warning("cannot read the metadata table of %s (%s); listing storage", self.path, exc)
            return None
        # what the listing depends on: the completed data instants and where archival ends (a write
        # requesting its instant between two listings of one operation does not change it)
        key = (tuple(self.timeline.completed()), self.timeline.archived_before(), mdt_state)
        if self._listing_cache is not None and self._listing_cache[0] == key:
            return self._listing_cache[1]
        listing: FileListing | None = None
        if not mdt_state:
            log.warning("%s declares a metadata table but has none; listing storage", self.path)
        else:
            files = mdt.list_files_partition()  # one listing serves the lag check and the read
            if lag := mdt.lag(self.timeline, files=files):
                log.warning("the metadata table of %s is behind the timeline (%s not applied); listing storage",
                            self.path, ", ".join(lag[:3]))
            else:
                try:
                    listing = mdt.listing(self.timeline, files=files)
                except (FileNotFoundError, HudiError) as exc:  # compacted and cleaned while being read
                    log.warning("cannot read the metadata table of %s (%s); listing storage", self.path, exc)
                    return None
        self._listing_cache = (key, listing)
        return listing

    def commits(self) -> list[CommitSummary]:
        return [CommitSummary(i, self.timeline.commit_metadata(i)) for i in self.timeline.completed_writes()]

    def latest_commit_metadata(self) -> CommitMetadata | None:
        latest = self.timeline.latest_completed_write()
        return self.timeline.commit_metadata(latest) if latest else None

    def avro_schema(self, *, as_of: str | None = None) -> str | None:
        """The table schema as Avro JSON: ``extraMetadata.schema`` of the latest completed write
        (at or before ``as_of``) that records one, else the create schema.

        Compaction and clustering never change the schema, and may run while a later write
        evolves it (a service's instant can sort after that write's), so a write's schema wins over
        theirs; a service's serves when no write of the active timeline records one.
        """
        for _attempt in range(3):
            try:
                service = None
                for inst in reversed(self.timeline.completed_writes()):
                    if as_of is not None and inst.timestamp > as_of:
                        continue
                    meta = self.timeline.commit_metadata(inst)
                    if not _is_record_schema(meta.schema):  # none, or "null" (Hudi's delete_partition)
                        continue
                    if meta.compacted or meta.operation_type in _SERVICE_OPERATIONS:
                        service = service or meta.schema
                        continue
                    return meta.schema
                return service or self.config.props.get(P.CREATE_SCHEMA)
            except HudiInstantNotFoundError:  # archived by another writer since the listing: list again
                self.timeline.reload()
        raise HudiInstantNotFoundError(f"the timeline of {self.path} kept changing while its schema was read; "
                                       "run again")

    def newest_base_file(self) -> str | None:
        """Relative path of the base file written last, None for a table without base files.

        Its footer tells how Spark reads types pyhudi does not map itself, and is the schema of a
        table whose commits record none (:meth:`arrow_schema`).
        """
        for inst in reversed(self.timeline.completed_writes()):
            try:
                stats = self.timeline.commit_metadata(inst).write_stats()
            except HudiInstantNotFoundError:  # archived meanwhile by another writer, and all before it
                break
            for stat in stats:
                if stat.path.endswith(".parquet") and self.storage.exists(stat.path):
                    return stat.path
        files = self.file_system_view().latest_base_files()
        return max(files, key=lambda b: b.instant_time).path if files else None

    def arrow_schema(self, *, as_of: str | None = None) -> pa.Schema | None:
        """The table schema (meta columns first) every file is read as, None before the first
        completed write (at or before ``as_of``).

        The schema recorded by the latest commit is the authority, not any file: a merge-on-read
        update that adds a column writes it to log files only, and struct fields may sit in another
        order in older files. Readers reconcile each file to it by name
        (:mod:`pyhudi.io.reconcile`). A table whose commits record no schema is read as its newest
        base file.
        """
        return self.schemas(as_of=as_of)[1]

    def schemas(self, *, as_of: str | None = None) -> tuple[str | None, pa.Schema | None]:
        """The table schema as Avro JSON (:meth:`avro_schema`) and as the file schema every file is
        read as (:meth:`arrow_schema`), from one walk of the commits; for services that write the
        schema they read with."""
        writes = self.timeline.completed_writes()
        if not any(as_of is None or w.timestamp <= as_of for w in writes):
            return None, None
        avro = self.avro_schema(as_of=as_of)
        return avro, self.arrow_schema_of(avro) if avro else self.newest_file_schema()

    def arrow_schema_of(self, avro: str) -> pa.Schema:
        """The file schema (meta columns first) of the Avro table schema ``avro``."""
        return table_arrow_schema(avro, operation_field=self.config.props.get(
            "hoodie.allow.operation.metadata.field", "false").lower() == "true")

    def newest_file_schema(self) -> pa.Schema | None:
        """The schema of the newest base file (meta columns included), None when there is none."""
        import pyarrow.parquet as pq

        newest = self.newest_base_file()
        if newest is None:
            return None
        with self.storage.fs.open_input_file(self.storage.full(newest)) as f:
            return pq.read_schema(f)

    def footer(self, rel_path: str) -> dict[str, str]:
        return read_footer(self.storage, rel_path)

    def __repr__(self) -> str:
        return f"HudiTable({self.path!r}, name={self.name!r}, type={self.table_type})"
