"""The file-system view: file groups and file slices built from file names and the timeline.

A base file belongs to the table only if the instant in its name is a completed write on the
timeline (or older than the active timeline, i.e. archived). Files of pending or failed instants
are invisible, which is what makes a write atomic: its files may exist long before its commit
file, and readers ignore them until then. Replace commits hide whole file groups.

The file names come from the metadata table's ``files`` partition when the table has a usable
one (``listing``), else from listing storage.

Which slice a log file extends depends on the table version. In version 6 a log file is named
after the base instant of its slice. From version 8 (timeline layout 2) it is named after the
delta commit that wrote it, and belongs to the newest slice whose base instant is not later than
that delta commit's *completion* time (Hudi's ``HoodieFileGroup.addLogFile``): a delta commit that
started before a compaction was planned but completed after it extends the compacted slice.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyhudi.config.properties import PARTITION_METAFILE
from pyhudi.errors import HudiInstantNotFoundError, HudiUnsupportedError
from pyhudi.io.file_names import BASE_FILE_PATTERN, UNREAD_BASE_FORMATS, log_order, parse_base_file, parse_log_file
from pyhudi.metadata.files import NON_PARTITIONED_KEY, FileListing
from pyhudi.read.merge import SliceToRead, Visibility
from pyhudi.storage import Storage
from pyhudi.timeline.instant import REPLACE_COMMIT
from pyhudi.timeline.timeline import META_FOLDER, Timeline


def completion_of(timestamp: str, completion_time: str | None) -> str:
    """When a completed instant completed: its completion time (timeline layout 2), else (layout
    1, or a layout-2 instant carried over from version 6 without one) its instant time."""
    return completion_time or timestamp


class _InPartition:
    """A data file known by its partition and name."""

    partition_path: str
    name: str

    @property
    def path(self) -> str:
        """Path relative to the table's base path."""
        return posixpath.join(self.partition_path, self.name) if self.partition_path else self.name


@dataclass(frozen=True)
class BaseFile(_InPartition):
    partition_path: str
    file_id: str
    instant_time: str
    write_token: str
    name: str
    size: int


@dataclass(frozen=True)
class LogFile(_InPartition):
    partition_path: str
    file_id: str
    base_instant: str
    version: int
    write_token: str | None
    name: str
    size: int


@dataclass(frozen=True)
class FileSlice:
    """A base file and the log files written on top of it (none for copy-on-write)."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None
    log_files: tuple[LogFile, ...] = ()
    #: change data files (``.cdc``) of a CDC table the write that made this slice wrote: not records
    #: of the slice (readers never merge them), but its files, which a clean deletes with it
    cdc_files: tuple[LogFile, ...] = ()

    def to_read(self) -> SliceToRead:
        """The picklable plan an executor merges this slice from."""
        return SliceToRead(self.partition_path, self.file_id, self.base_file.path if self.base_file else None,
                           tuple(lf.path for lf in self.log_files))


@dataclass
class FileGroup:
    partition_path: str
    file_id: str
    slices: list[FileSlice] = field(default_factory=list)

    @property
    def latest_slice(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None


class FileSystemView:
    """Committed file groups of a table, as of an instant (default: the latest completed write)."""

    def __init__(self, storage: Storage, timeline: Timeline, *, as_of: str | None = None,
                 partitions: list[str] | None = None, include_replaced: bool = False,
                 listing: FileListing | None = None, completed_by: str | None = None) -> None:
        """``as_of``: only writes requested at or before it (time travel); ``completed_by``: only
        writes completed at or before it (timeline layout 2: an incremental pull's end)."""
        self.storage = storage
        self.listing = listing  # the metadata table's file list; None: list storage
        self.timeline = timeline
        writes = [i for i in timeline.completed_writes() if (as_of is None or i.timestamp <= as_of)
                  and (completed_by is None or completion_of(i.timestamp, i.completion_time) <= completed_by)]
        if as_of is None and completed_by is not None:
            as_of = max((i.timestamp for i in writes), default="0")
        self.as_of = as_of if as_of is not None else (writes[-1].timestamp if writes else None)
        self._committed = {i.timestamp for i in writes}
        # layout 2: a log file extends the slice its delta commit's completion time falls in
        self._by_completion = timeline.layout_version >= 2
        self._completion = {i.timestamp: completion_of(i.timestamp, i.completion_time)
                            for i in timeline.completed()} if self._by_completion else {}
        self._archived_before = timeline.archived_before()  # older instants: archived, committed
        self._replaced = self._replaced_file_ids(writes)
        self._include_replaced = include_replaced  # the cleaner sees retired file groups too
        self._by_partition: dict[str, dict[str, FileGroup]] = {}  # partition -> file id -> group
        self._partitions: list[str] = []
        self._load(partitions)

    # -- loading -------------------------------------------------------------------------------
    def _replaced_file_ids(self, writes: list) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the replace commit that retired the group."""
        replaced: dict[tuple[str, str], str] = {}
        for inst in writes:
            if inst.action != REPLACE_COMMIT:
                continue
            try:
                meta = self.timeline.commit_metadata(inst)
            except HudiInstantNotFoundError:  # archived meanwhile: its replaced groups were cleaned
                continue
            for partition, ids in (meta.partition_to_replace_file_ids or {}).items():
                for fid in ids:
                    replaced.setdefault((partition, fid), inst.timestamp)
        return replaced

    def replaced_at(self, partition: str, file_id: str) -> str | None:
        """The replace commit that retired a file group, None for a live group."""
        return self._replaced.get((partition, file_id))

    def _hidden(self, partition: str, file_id: str) -> bool:
        return not self._include_replaced and (partition, file_id) in self._replaced

    def is_committed(self, instant_time: str) -> bool:
        if self.as_of is not None and instant_time > self.as_of:
            return False
        if instant_time in self._committed:
            return True
        return self._archived_before is not None and instant_time < self._archived_before

    def _load(self, partitions: list[str] | None) -> None:
        if self.listing is not None:
            files = self.listing.files
            if partitions is None:
                partitions = sorted({"" if p == NON_PARTITIONED_KEY else p for p in self.listing.partitions}
                                    | {p for p, names in files.items() if names})
            self._partitions = list(partitions)
            for partition in self._partitions:
                self._add_partition(partition, files.get(partition, {}).items())
            return
        if partitions is None:
            listing: dict[str, list] = {}
            for rel, info in self.storage.walk_files(""):
                if rel.startswith(META_FOLDER + "/"):
                    continue
                parent = posixpath.dirname(rel)
                if any(part.startswith(".") for part in parent.split("/") if part):
                    continue
                listing.setdefault(parent, []).append(info)
            found = sorted(p for p, infos in listing.items()
                           if any(i.name == PARTITION_METAFILE or parse_base_file(i.name) for i in infos))
        else:
            listing = {p: self.storage.list_files(p) for p in partitions}
            found = list(partitions)
        self._partitions = found
        for partition in found:
            self._add_partition(partition, ((i.name, i.size) for i in listing.get(partition, [])))

    def _add_partition(self, partition: str, infos: Iterable[tuple[str, int]]) -> None:
        """File groups of one partition from its (file name, size) pairs."""
        bases: dict[str, list[BaseFile]] = {}
        logs: dict[str, list[LogFile]] = {}
        cdc: dict[str, list[LogFile]] = {}
        for name, size in infos:
            parsed = BASE_FILE_PATTERN.match(name)
            if parsed is not None and parsed.group(4) != "parquet":
                fmt = UNREAD_BASE_FORMATS.get(parsed.group(4).lower())
                if fmt is not None:  # a base file pyhudi cannot read: skipping it would lose its records
                    raise HudiUnsupportedError(
                        f"{self.storage.full(posixpath.join(partition, name))} is a {fmt} base file; pyhudi reads "
                        f"PARQUET base files only, not {fmt}: use Apache Hudi's own Spark bundle for this table")
                parsed = None
            if parsed is not None:  # file id, write token, instant time
                fid, token, instant = parsed.group(1, 2, 3)
                if self._hidden(partition, fid) or not self.is_committed(instant):
                    continue
                bases.setdefault(fid, []).append(BaseFile(partition, fid, instant, token, name, size))
                continue
            lg = parse_log_file(name)
            if lg is not None and lg.extension == "log" and not lg.cdc and not self._hidden(partition, lg.file_id):
                logs.setdefault(lg.file_id, []).append(LogFile(
                    partition, lg.file_id, lg.base_instant, lg.version, lg.write_token, name, size))
            elif lg is not None and lg.cdc and not self._hidden(partition, lg.file_id):
                cdc.setdefault(lg.file_id, []).append(LogFile(
                    partition, lg.file_id, lg.base_instant, lg.version, lg.write_token, name, size))
        groups = self._by_partition.setdefault(partition, {})
        for fid in sorted(set(bases) | set(logs)):
            group = FileGroup(partition, fid)
            only = bases.get(fid, [])
            if len(only) == 1 and fid not in logs:  # the common case: one base file, no logs
                group.slices.append(FileSlice(partition, fid, only[0].instant_time, only[0]))
                groups[fid] = group
                continue
            by_instant: dict[str, BaseFile] = {}
            for b in sorted(bases.get(fid, []), key=lambda b: (b.instant_time, b.name)):
                by_instant[b.instant_time] = b  # two attempts of one instant: keep one
            slice_logs: dict[str, list[LogFile]] = {t: [] for t in by_instant}
            for lf in logs.get(fid, []):
                slice_logs.setdefault(self._slice_of(lf, by_instant), []).append(lf)
            merged: list[tuple[str, list[LogFile]]] = []
            for instant in sorted(slice_logs):
                if instant not in by_instant and merged:
                    # logs named after a compaction that has not completed (no base file) extend the
                    # slice before it, as Hudi's merged view does: else a group without base files
                    # would hide its earlier logs while a compaction is pending
                    merged[-1][1].extend(slice_logs[instant])
                    continue
                merged.append((instant, list(slice_logs[instant])))
            for instant, slice_files in merged:
                group.slices.append(FileSlice(partition, fid, instant, by_instant.get(instant),
                                              tuple(sorted(slice_files, key=log_order))))
            if group.slices:
                groups[fid] = group
        for fid, files in cdc.items():
            self._attach_cdc(groups.get(fid), files)

    @staticmethod
    def _attach_cdc(group: FileGroup | None, files: list[LogFile]) -> None:
        """Give each change data file to the slice its write made (base instant = the file's
        instant); one whose write made no slice of the view (failed, or not yet complete) is left out."""
        if group is None:
            return
        for i, piece in enumerate(group.slices):
            mine = tuple(sorted((f for f in files if f.base_instant == piece.base_instant), key=log_order))
            if mine:
                group.slices[i] = dataclasses.replace(piece, cdc_files=mine)

    def _slice_of(self, lf: LogFile, base_instants: Iterable[str]) -> str:
        """The base instant of the slice a log file extends (its own instant when no base file is
        old enough: a file group that began with log files).

        Version 6: the newest base instant not later than the instant in its name (its slice's).
        Layout 2: the newest base instant not later than the completion time of the delta commit
        that wrote it; a log of a pending (or failed) delta commit extends the latest slice, and
        one of an archived delta commit, whose completion time the active timeline no longer
        holds, is placed by its requested time (completion comes after it).
        """
        bases = list(base_instants)
        key = lf.base_instant
        if self._by_completion:
            done = self._completion.get(lf.base_instant)
            archived = self._archived_before is not None and lf.base_instant < self._archived_before
            if done is None and not archived:
                return max(bases) if bases else lf.base_instant
            key = done or lf.base_instant
        owners = [t for t in bases if t <= key]
        return max(owners) if owners else lf.base_instant

    # -- queries -------------------------------------------------------------------------------
    @property
    def partitions(self) -> list[str]:
        return list(self._partitions)

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        """File groups, ordered by partition and file id."""
        if partition is not None:
            groups = self._by_partition.get(partition, {})
            return [groups[f] for f in sorted(groups)]
        return [g for p in sorted(self._by_partition) for g in self.file_groups(p)]

    def latest_slices(self, partition: str | None = None) -> list[FileSlice]:
        out = []
        for group in self.file_groups(partition):
            latest = group.latest_slice
            if latest is not None:
                out.append(latest)
        return out

    def visibility(self, *, before: str | None = None) -> Visibility:
        """Which instants' log blocks readers of this view may use."""
        return Visibility(frozenset(self._committed), self._archived_before, self.as_of, before)

    def latest_base_files(self, partition: str | None = None) -> list[BaseFile]:
        return [s.base_file for s in self.latest_slices(partition) if s.base_file is not None]
