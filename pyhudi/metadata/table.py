"""The metadata table (MDT) of a data table, read: its state, its timeline and its records.

``<table>/.hoodie/metadata`` is a merge-on-read table of the data table's version (6, 8 or 9)
whose partitions (``files``, ``column_stats``, ``bloom_filters``, ``record_index``, and from version 8
``partition_stats``) are HFile base
files and HFile log blocks (:mod:`pyhudi.metadata.files` decodes them). Readers trust only the
blocks of MDT delta commits whose data instant completed, so a data write that failed after its
MDT delta commit shows nothing.

This module only reads, so that :class:`pyhudi.table.table.HudiTable` can list files through it;
the writer (initialization, delta commits, the MDT's own compaction, clean and archival) stands
above the table layer, in :mod:`pyhudi.commit.metadata_writer`, and the layout it keeps is
described there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from pyhudi.config import properties as P
from pyhudi.config.properties import read_table_config, table_config_of
from pyhudi.io.file_names import parse_base_file, slice_key
from pyhudi.metadata import bloom_filters, column_stats, partition_stats
from pyhudi.metadata.files import (
    FILES_PARTITION,
    INIT_INSTANT_PREFIX,
    METADATA_FOLDER,
    FileListing,
    MdtSlice,
    files_record,
    latest_slices,
    partitions_record,
    read_files_partition,
    read_partition,
)
from pyhudi.metadata.schema import schema_of
from pyhudi.storage import FileInfo, Storage
from pyhudi.timeline.commit_metadata import WriteStat
from pyhudi.timeline.instant import CLEAN, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, RESTORE, ROLLBACK
from pyhudi.timeline.timeline import Timeline

log = logging.getLogger("pyhudi")

FILE_GROUP = "files-0000-0"
COLUMN_STATS_PARTITION = "column_stats"
BLOOM_FILTERS_PARTITION = "bloom_filters"
RECORD_INDEX_PARTITION = "record_index"
PARTITION_STATS_PARTITION = partition_stats.PARTITION
#: the partitions pyhudi writes, with the prefix of their file group ids
PREFIXES = {FILES_PARTITION: "files-", COLUMN_STATS_PARTITION: "col-stats-", BLOOM_FILTERS_PARTITION: "bloom-filters-",
            RECORD_INDEX_PARTITION: "record-index-", PARTITION_STATS_PARTITION: partition_stats.FILE_GROUP_PREFIX}
Records = list[tuple[str, dict]]
Cells = list[tuple[bytes, bytes]]
#: writes a partition's first base files at an instant, returning their stats (the record index,
#: whose records come from every data file and are written where the data is: in executors)
Builder = Callable[[str], list[WriteStat]]
#: write token of MDT files: written by the driver, outside any Spark task
WRITE_TOKEN = "0-0-0"
COMPACTION_SUFFIX = "001"
CLEAN_SUFFIX = "002"
ROLLBACK_SUFFIX = "006"
INIT_SUFFIX = "010"
PAYLOAD_CLASS = "org.apache.hudi.metadata.HoodieMetadataPayload"
KEYGEN_CLASS = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
#: data-table actions that change its files, each applied to the MDT as a delta commit
FILE_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLEAN, ROLLBACK, RESTORE)
#: MDT archival window (Hudi's hoodie.metadata.keep.min.commits / keep.max.commits)
KEEP_MIN, KEEP_MAX = 20, 30
#: the order in which Hudi 1.x initializes partitions (``MetadataPartitionType``), each at its own
#: reserved instant ``00000000000000000``, ``...001``, ... (version 8 and later); partition
#: statistics come last (after the expression and secondary indexes pyhudi does not keep)
INIT_ORDER = (FILES_PARTITION, COLUMN_STATS_PARTITION, BLOOM_FILTERS_PARTITION, RECORD_INDEX_PARTITION,
              PARTITION_STATS_PARTITION)


def hfile_name(instant: str, file_group: str = FILE_GROUP) -> str:
    """The base file a file group of the MDT gets at ``instant``."""
    return f"{file_group}_{WRITE_TOKEN}_{instant}.hfile"


def usable_partitions(props: Mapping[str, str]) -> set[str]:
    return {p for p in (props.get(P.METADATA_PARTITIONS) or "").split(",") if p}


class MetadataTable:
    """The metadata table under a data table's storage."""

    def __init__(self, data_storage: Storage, *, layout_version: int | None = None) -> None:
        """``layout_version``: the MDT timeline's, when the caller read it before (a handle of the
        data table opening the MDT again), so that its ``hoodie.properties`` is not read again."""
        self.data_storage = data_storage
        self.storage = data_storage.child(METADATA_FOLDER)
        self._timeline: Timeline | None = None
        self._layout_version = layout_version
        #: what the last :meth:`exists` read of ``hoodie.properties``, for the timeline made next
        self._read: tuple[bytes | None] | None = None
        self._version: int | None = None

    @property
    def table_version(self) -> int:
        """The MDT's table version (that of its data table), read once from its properties."""
        if self._version is None:
            config = read_table_config(self.storage)
            self._version = config.version if config is not None else 6
        return self._version

    @property
    def record_schema(self) -> str:
        """The record schema text this MDT's files are written in."""
        return schema_of(self.table_version)

    # -- state ---------------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the MDT has its ``hoodie.properties``: read, not probed, because its timeline
        (made next, as a rule) needs what it says, and a read costs no more than a probe."""
        self._read = (self.storage.read_bytes_or_none(P.PROPERTIES_FILE),)
        return self._read[0] is not None

    @property
    def timeline(self) -> Timeline:
        if self._timeline is None and self._layout_version is not None:
            self._timeline = Timeline(self.storage, layout_version=self._layout_version)
        if self._timeline is None:
            # hoodie.properties read once, not probed first; no MDT (no file) is layout 1
            read, self._read = self._read, None
            config = table_config_of(self.storage, read[0]) if read is not None and read[0] is not None else None
            if config is None and (read is None or read[0] is not None):  # not read yet, or damaged
                config = read_table_config(self.storage)
            self._timeline = Timeline(self.storage, layout_version=config.layout_version if config else 1,
                                      utc=config.utc_timeline if config else False)
            if config is not None and self._version is None:
                self._version = config.version
        return self._timeline

    def completed(self) -> dict[str, str | None]:
        return {i.timestamp: i.completion_time for i in self.timeline.completed()}

    def list_files_partition(self) -> list[FileInfo]:
        """The files of the ``files`` partition: one listing that :meth:`lag` and :meth:`listing`
        can share, where each would list the folder again."""
        return self.storage.list_files(FILES_PARTITION)

    def base_instant(self, *, files: list[FileInfo] | None = None) -> str | None:
        """Time of the newest completed base file (the init delta commit's, or a compaction's);
        ``files``: the ``files`` partition as listed just before (default: list it now)."""
        done = self.completed()
        bases = [parsed.instant_time for info in (self.list_files_partition() if files is None else files)
                 if info.name.endswith(".hfile") and (parsed := parse_base_file(info.name)) is not None
                 and parsed.instant_time in done]
        return max(bases) if bases else None

    def partitions(self) -> dict[str, list[str]]:
        """The MDT partitions pyhudi writes that exist, with their file groups (one listing of the
        MDT's folder, then one of each partition found there)."""
        present = set(self.storage.list_dirs(""))
        out = {}
        for partition in PREFIXES:
            if partition not in present:
                continue
            groups = sorted({key[0] for info in self.storage.list_files(partition) if (key := slice_key(info.name))})
            if groups:
                out[partition] = groups
        return out

    def latest_compaction(self) -> str | None:
        commits = self.timeline.completed([COMMIT])
        return commits[-1].timestamp if commits else None

    def lag(self, data_timeline: Timeline, *, files: list[FileInfo] | None = None) -> list[str]:
        """Completed data instants the MDT has not applied (it is behind when any); ``files``: as
        for :meth:`base_instant`."""
        base = self.base_instant(files=files)
        if base is None:
            return ["(no base file)"]
        applied = {i.timestamp for i in self.timeline.completed([DELTA_COMMIT])}
        if self.timeline.layout_version >= 2:
            # partitions are initialized at reserved times below every data instant: what they
            # listed is every data instant completed before their initialization completed
            inits = [i.completion_time or "" for i in self.timeline.completed([DELTA_COMMIT])
                     if i.timestamp.startswith(INIT_INSTANT_PREFIX)]
            listed_by = max(inits, default="")
            return [i.timestamp for i in data_timeline.completed(FILE_ACTIONS)
                    if (i.completion_time or "") > listed_by and i.timestamp not in applied]
        return [i.timestamp for i in data_timeline.completed(FILE_ACTIONS)
                if i.timestamp > base and i.timestamp not in applied]

    def listing(self, data_timeline: Timeline, *, files: list[FileInfo] | None = None) -> FileListing:
        """The data table's files as the MDT lists them, trusting only completed data instants;
        ``files``: as for :meth:`base_instant`."""
        return read_files_partition(self.data_storage, mdt_completed=self.completed(),
                                    data_completed={i.timestamp for i in data_timeline.completed()},
                                    archived_before=data_timeline.archived_before(), listed=files)

    def current_base(self, partition: str, group: str) -> str:
        """The base instant of a file group's latest completed slice (new log files name it)."""
        done = self.completed()
        first = min(done, default="")
        bases = [parsed.instant_time for info in self.storage.list_files(partition)
                 if info.name.endswith(".hfile") and (parsed := parse_base_file(info.name)) is not None
                 and parsed.file_id == group and (parsed.instant_time in done or parsed.instant_time < first)]
        return max(bases, default="")

    def merged_records(self, data_timeline: Timeline) -> dict[str, Records]:
        """Every partition's records merged to one per key (what a compaction writes)."""
        out: dict[str, Records] = {}
        for partition in self.partitions():
            if partition == RECORD_INDEX_PARTITION:
                continue  # compacted cell by cell (record_index.merged_cells): millions of keys
            if partition == FILES_PARTITION:
                listing = self.listing(data_timeline)
                names = listing.partitions | {p or "." for p, files in listing.files.items() if files}
                records = [partitions_record(sorted(names))]
                records += [files_record(p, files) for p, files in sorted(listing.files.items())]
            elif partition == BLOOM_FILTERS_PARTITION:
                records = sorted(bloom_filters.latest(self.read(partition, data_timeline)).items())
            else:
                records = [(k, r) for k, r in column_stats.merged(self.read(partition, data_timeline))
                           if not r["ColumnStatsMetadata"].get("isDeleted")]
            out[partition] = records
        return out

    def read(self, partition: str, data_timeline: Timeline, *,
             key_prefixes: tuple[str, ...] | None = None) -> Records:
        """A partition's records in merge order, trusting only completed data instants."""
        return read_partition(self.data_storage, partition, mdt_completed=self.completed(),
                              data_completed={i.timestamp for i in data_timeline.completed()},
                              archived_before=data_timeline.archived_before(), key_prefixes=key_prefixes)

    def slices(self, partition: str, data_timeline: Timeline) -> list[MdtSlice]:
        """The latest slice of each file group of a partition, as readers see them."""
        return latest_slices(self.data_storage, partition, mdt_completed=self.completed(),
                             data_completed={i.timestamp for i in data_timeline.completed()},
                             archived_before=data_timeline.archived_before())
