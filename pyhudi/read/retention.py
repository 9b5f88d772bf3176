"""Which past instants can still be read: the cleaner's footprint on time travel and incremental pulls.

A query as of instant T needs, in every file group, the file slice that was latest at T. The
cleaner deletes old slices, so a past snapshot silently loses file groups unless the reader checks.
This module derives, from the clean instants on the active timeline, the time interval during which
each deleted slice was the latest of its group: from its base instant up to the base instant of the
next slice of the group (or the replace commit that retired the group). A query as of T is exact
iff T falls in none of those intervals (for the file groups it reads). Hudi readers find out by
failing on a missing file; we refuse up front, naming the clean and the retention option.

The rule works for cleans written by Apache Hudi too (it only uses the deleted file names), and
for every cleaning policy, savepoints included: a savepointed slice is never deleted, so no
interval covers the savepoint instant.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from pyhudi.errors import HudiRetentionError, HudiUnsupportedError
from pyhudi.io.file_names import slice_key
from pyhudi.storage import Storage
from pyhudi.timeline.archive import archived_timeline, has_archive
from pyhudi.timeline.instant import CLEAN, REPLACE_COMMIT, Instant, State
from pyhudi.timeline.timeline import Timeline, read_avro_record


@dataclass(frozen=True)
class CleanedSlice:
    """A file slice removed by a clean, and the time span during which queries needed it."""

    partition_path: str
    file_id: str
    base_instant: str
    superseded_at: str  # first instant at which a newer slice (or a replace) took over
    clean_instant: str

    def needed_at(self, instant: str) -> bool:
        return self.base_instant <= instant < self.superseded_at


def _planned_files(record: dict) -> dict[str, set[str]]:
    """partition -> names a clean record covers: deleted, failed or merely planned."""
    out: dict[str, set[str]] = {}
    for partition, meta in (record.get("partitionMetadata") or {}).items():  # HoodieCleanMetadata
        names = out.setdefault(partition, set())
        for key in ("deletePathPatterns", "successDeleteFiles", "failedDeleteFiles"):
            names.update(posixpath.basename(p) for p in meta.get(key) or [])
    for partition, infos in (record.get("filePathsToBeDeletedPerPartition") or {}).items():  # HoodieCleanerPlan
        out.setdefault(partition, set()).update(posixpath.basename(i["filePath"]) for i in infos or [])
    for partition, names in (record.get("filesToBeDeletedPerPartition") or {}).items():
        out.setdefault(partition, set()).update(names or [])
    return out


def _clean_records(storage: Storage, timeline: Timeline, *, archived: bool) -> list[tuple[str, dict]]:
    """(clean instant, record) of every clean: completed ones' metadata and pending ones' plans (a
    clean that died midway may have deleted part of its plan), archived ones too if asked."""
    out = [(c.timestamp, read_avro_record(timeline.read_bytes(c), source=timeline.path_of(c)))
           for c in timeline.completed([CLEAN])]
    for c in timeline.pending([CLEAN]):
        requested = Instant(c.timestamp, State.REQUESTED, CLEAN)
        if requested in timeline.instant_files:
            out.append((c.timestamp, read_avro_record(timeline.read_bytes(requested),
                                                      source=timeline.path_of(requested))))
    if archived:
        old = archived_timeline(storage)  # archive log files (v6) or the LSM history (v8, v9)
        for inst in old.instants():
            if inst.action == CLEAN and inst.is_completed:
                meta = old.metadata(inst.timestamp, CLEAN)
                if meta:
                    out.append((inst.timestamp, meta))
    return sorted(out, key=lambda item: item[0])


def cleaned_slices(storage: Storage, timeline: Timeline, *, archived: bool = False) -> list[CleanedSlice]:
    """Every slice the cleans removed (those on the active timeline, and archived ones if asked),
    with the span during which queries needed it."""
    records = _clean_records(storage, timeline, archived=archived)
    if not records:
        return []
    planned: dict[tuple[str, str, str], str] = {}  # (partition, fid, base instant) -> clean instant
    names_in: dict[str, set[str]] = {}
    for clean_time, record in records:
        for partition, names in _planned_files(record).items():
            for name in names:
                key = slice_key(name)
                if key is not None:
                    planned.setdefault((partition, *key), clean_time)
                    names_in.setdefault(partition, set()).add(name)
    listing = {p: {info.name for info in storage.list_files(p)} for p in names_in}
    # a slice counts as removed when any file of it a clean covered is gone (recorded as deleted,
    # as failed, or not recorded yet by a clean that died): its snapshot is incomplete either way
    removed: dict[tuple[str, str, str], str] = {}
    for partition, names in names_in.items():
        for name in names - listing[partition]:
            key = slice_key(name)
            if key is not None:
                removed.setdefault((partition, *key), planned[(partition, *key)])
    replaced_at: dict[tuple[str, str], str] = {}
    for inst in timeline.completed([REPLACE_COMMIT]):
        for partition, ids in (timeline.commit_metadata(inst).partition_to_replace_file_ids or {}).items():
            for fid in ids:
                replaced_at.setdefault((partition, fid), inst.timestamp)
    known: dict[tuple[str, str], set[str]] = {}
    for partition, fid, base in removed:
        known.setdefault((partition, fid), set()).add(base)
    committed = {i.timestamp for i in timeline.completed_writes()}
    first = timeline.first_data_instant_time()
    for partition in {p for p, _, _ in removed}:
        for name in listing[partition]:
            key = slice_key(name)
            # a leftover of a failed write is no successor: only committed (or archived) slices count
            if key is not None and (partition, key[0]) in known and (
                    key[1] in committed or (first is not None and key[1] < first)):
                known[(partition, key[0])].add(key[1])
    out = []
    for (partition, fid, base), by_clean in sorted(removed.items()):
        later = [t for t in known[(partition, fid)] if t > base]
        retired = replaced_at.get((partition, fid))
        if retired is not None and retired > base:
            later.append(retired)
        out.append(CleanedSlice(partition, fid, base, min(later, default=by_clean), by_clean))
    return out


class Retention:
    """Checks that a query as of an instant reads a complete snapshot.

    Cleans on the active timeline are always consulted; the archived ones only for instants older
    than the active timeline (reading the archive costs more, and only such queries need it).
    """

    def __init__(self, storage: Storage, timeline: Timeline) -> None:
        self.storage = storage
        self.timeline = timeline
        self.archived = has_archive(storage)
        self.first_active = timeline.first_data_instant_time()
        self.cleaned = cleaned_slices(storage, timeline)
        self._with_archive: list[CleanedSlice] | None = None
        self._lsm: tuple[str] | None = None

    @property
    def lsm_history(self) -> str | None:
        """The LSM archived timeline of a layout-2 table (``.hoodie/timeline/history``), when
        archival wrote any file there."""
        if self._lsm is None:
            folder = f"{self.timeline.folder}/history"
            self._lsm = (folder if self.timeline.layout_version >= 2 and self.storage.list_files(folder) else "",)
        return self._lsm[0] or None

    def _slices_for(self, instant: str) -> list[CleanedSlice]:
        # a slice a clean removed stopped being the latest before that clean: archived cleans matter
        # only to instants older than every clean still on the active timeline
        oldest_clean = min((c.timestamp for c in self.timeline.instants() if c.action == CLEAN), default=None)
        if not self.archived or (oldest_clean is not None and instant >= oldest_clean):
            return self.cleaned
        if self._with_archive is None:
            self._with_archive = cleaned_slices(self.storage, self.timeline, archived=True)
        return self._with_archive

    def check(self, instant: str, *, file_groups: Iterable[tuple[str, str]] | None = None,
              purpose: str = "time travel") -> None:
        """Raise :class:`HudiRetentionError` unless every needed slice as of ``instant`` still exists,
        the cleans of the archived timeline included (version 6's archive files, or the LSM history
        of versions 8 and 9). An incremental pull reaching before the active timeline of a version 8+
        table is a :class:`HudiUnsupportedError`: it ranges on completion times, which pyhudi takes
        from the active timeline only."""
        if purpose != "time travel" and self.first_active is not None and instant < self.first_active \
                and (history := self.lsm_history):
            raise HudiUnsupportedError(
                f"{purpose} to {instant} reaches before the active timeline (it starts at {self.first_active}), into "
                f"instants archived in the LSM timeline {self.storage.full(history)} of table version 8+, which "
                "pyhudi does not read; query from a later instant, or use Apache Hudi's own Spark bundle")
        wanted = None if file_groups is None else set(file_groups)
        for gone in self._slices_for(instant):
            if not gone.needed_at(instant):
                continue
            if wanted is not None and (gone.partition_path, gone.file_id) not in wanted:
                continue
            raise HudiRetentionError(
                f"{purpose} to {instant} needs file group {gone.file_id} of partition "
                f"'{gone.partition_path}' as written at {gone.base_instant}, which clean {gone.clean_instant} "
                f"removed; instants from {gone.superseded_at} on can be read. To query further back, retain more "
                "history (hoodie.clean.commits.retained, or hoodie.clean.fileversions.retained) or take savepoints")
