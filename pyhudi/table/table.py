"""``HudiTable``: a table's properties, timeline, file groups and schema in one handle.

Loading reads ``hoodie.properties`` and lists the timeline; file listings are made on demand
(``file_system_view``) so opening a large table stays cheap. Everything here is plain Python and
pyarrow: the CLI and tests use it without a SparkSession.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from pyhudi.errors import HudiInstantNotFoundError, HudiTableNotFoundError
from pyhudi.io.base_file import read_footer
from pyhudi.storage import Storage
from pyhudi.table import properties as P
from pyhudi.table.fs_view import FileSystemView
from pyhudi.table.properties import TableConfig, load_table_config, store_table_config
from pyhudi.timeline.instant import Instant
from pyhudi.timeline.metadata import CommitMetadata
from pyhudi.timeline.timeline import META_FOLDER, Timeline


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


class HudiTable:
    """An existing Hudi table at ``path`` (a local path or a URI pyarrow understands)."""

    def __init__(self, path: str) -> None:
        self.storage = Storage(path)
        if not self.storage.exists(P.PROPERTIES_FILE):
            raise HudiTableNotFoundError(
                f"{path} is not a Hudi table: {self.storage.full(P.PROPERTIES_FILE)} does not exist "
                "(write to it with pyhudi.write first, or check the path)")
        self.config: TableConfig = load_table_config(self.storage)
        self.timeline = Timeline(self.storage, layout_version=self.config.layout_version)

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
    def exists(path: str) -> bool:
        return Storage(path).exists(P.PROPERTIES_FILE)

    @classmethod
    def create(cls, path: str, props: Mapping[str, str]) -> HudiTable:
        """Lay out a new table: the meta folder, its sub-folders and ``hoodie.properties``."""
        storage = Storage(path)
        for folder in ("", "/.aux", "/.aux/.bootstrap/.partitions", "/.aux/.bootstrap/.fileids",
                       "/.schema", "/.temp", "/archived"):
            storage.mkdirs(META_FOLDER + folder)
        store_table_config(storage, props)
        return cls(path)

    def reload(self) -> HudiTable:
        self.config = load_table_config(self.storage)
        self.timeline.reload()
        return self

    def update_properties(self, changes: Mapping[str, str | None]) -> None:
        props = dict(self.config.props)
        for k, v in changes.items():
            if v is None:
                props.pop(k, None)
            else:
                props[k] = v
        self.config = store_table_config(self.storage, props)

    # -- views ---------------------------------------------------------------------------------
    def file_system_view(self, *, as_of: str | None = None, partitions: list[str] | None = None,
                         include_replaced: bool = False) -> FileSystemView:
        return FileSystemView(self.storage, self.timeline, as_of=as_of, partitions=partitions,
                              include_replaced=include_replaced)

    def commits(self) -> list[CommitSummary]:
        return [CommitSummary(i, self.timeline.commit_metadata(i)) for i in self.timeline.completed_writes()]

    def latest_commit_metadata(self) -> CommitMetadata | None:
        latest = self.timeline.latest_completed_write()
        return self.timeline.commit_metadata(latest) if latest else None

    def avro_schema(self) -> str | None:
        """The table schema as Avro JSON: latest commit's ``extraMetadata.schema`` or the create schema."""
        for _attempt in range(3):
            try:
                for inst in reversed(self.timeline.completed_writes()):
                    schema = self.timeline.commit_metadata(inst).schema
                    if schema:
                        return schema
                return self.config.props.get(P.CREATE_SCHEMA)
            except HudiInstantNotFoundError:  # archived by another writer since the listing: list again
                self.timeline.reload()
        raise HudiInstantNotFoundError(f"the timeline of {self.path} kept changing while its schema was read; "
                                       "run again")

    def newest_base_file(self) -> str | None:
        """Relative path of the base file written last, None for an empty table.

        Every copy-on-write commit writes whole files in the then-current schema, so this file
        carries the latest table schema.
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

    def arrow_schema(self) -> pa.Schema | None:
        """The schema of the newest base file (meta columns included), None for an empty table."""
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
