"""Which partitions a catalog must add, update or drop, from the table's timeline and file listing.

Hudi's sync tools (docs/catalog-sync.md §3.2) take partition changes from commit metadata since the
last synced instant and decide drops by trusting single instants (a ``delete_partition`` replace, a
clean's ``isPartitionDeleted``); a range with only a clean drops nothing, and a partition emptied
by a replace is dropped only if the replace's operation says so. Here every partition the range
touched (written, replaced or cleaned) is checked against the table as it is now: a partition is
live when the file-system view of the latest snapshot holds a file group in it, dropped otherwise.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyhudi.errors import HudiError, HudiInstantNotFoundError
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import CLEAN, REPLACE_COMMIT, RESTORE, ROLLBACK, WRITE_ACTIONS, Instant

__all__ = ["HudiPartitionValueError", "PartitionChanges", "live_partitions", "partition_changes",
           "partition_location", "partition_values"]


class HudiPartitionValueError(HudiError, ValueError):
    """A partition path that does not give one value per partition field: registering it would put
    rows under the wrong partition columns in the catalog."""


@dataclass(frozen=True)
class PartitionChanges:
    """Partition changes a catalog must apply, as relative partition paths (sorted).

    ``added``: live partitions the catalog lacks (or, without catalog partitions, that were not live
    at the last sync); ``updated``: live partitions written since the last sync that the catalog
    already has (a catalog re-checks their location); ``dropped``: partitions with no live file
    group. ``last_synced`` / ``last_synced_completion``: the newest completed commit of the commits
    timeline (requested and completion time), what the catalog records as synced; ``full``: computed
    from a full listing rather than from the timeline since the last sync.
    """

    added: tuple[str, ...]
    updated: tuple[str, ...]
    dropped: tuple[str, ...]
    last_synced: str | None
    full: bool
    last_synced_completion: str | None = None

    @property
    def changed(self) -> bool:
        """Whether any catalog partition call is needed (none: a sync writes no partition)."""
        return bool(self.added or self.updated or self.dropped)


def live_partitions(table: HudiTable, partitions: Iterable[str] | None = None, *, as_of: str | None = None,
                    completed_by: str | None = None) -> set[str]:
    """Partitions holding at least one live file group (of ``partitions`` only, when given: a listing of
    just those). An emptied partition keeps its folder and ``.hoodie_partition_metadata`` after a
    replace or clean, so the folder's existence says nothing; the non-partitioned ``""`` is left out,
    as no catalog registers it."""
    wanted = None if partitions is None else sorted({p for p in partitions if p})
    if wanted is not None and not wanted:
        return set()
    view = table.file_system_view(as_of=as_of, partitions=wanted, completed_by=completed_by)
    return {p for p in view.partitions if p and view.latest_slices(p)}


def _range(table: HudiTable, last_synced: str, last_synced_completion: str | None) -> list[Instant]:
    """Completed instants after the last sync: requested after ``last_synced``, and on layout 2 also
    those requested earlier but completed after ``last_synced_completion`` (a write that was still
    running when the catalog was synced: Hudi's "hollow" instants)."""
    hollow = table.timeline.layout_version >= 2 and last_synced_completion is not None
    return [i for i in table.timeline.completed()
            if i.timestamp > last_synced
            or (hollow and i.completion_time is not None and i.completion_time > (last_synced_completion or ""))]


def _touched(table: HudiTable, instants: Sequence[Instant]) -> tuple[set[str], set[str]]:
    """(written, touched) partitions of the instants: written by commit metadata (write stats and, for
    a replace, the groups it replaced), touched adds every partition a clean removed files from."""
    written: set[str] = set()
    touched: set[str] = set()
    for inst in instants:
        try:
            if inst.action in WRITE_ACTIONS:
                meta = table.timeline.commit_metadata(inst)
                written |= set(meta.partition_to_write_stats)
                if inst.action == REPLACE_COMMIT:
                    touched |= set(meta.partition_to_replace_file_ids or {})
            elif inst.action == CLEAN:
                record = read_record(table.timeline.read_bytes(inst), source=table.timeline.path_of(inst))
                touched |= set(record.get("partitionMetadata") or {})
        except HudiInstantNotFoundError:
            continue  # archived while being read: a full sync next time finds what it changed
    written.discard("")
    touched = (touched | written) - {""}
    return written, touched


def _needs_full(table: HudiTable, last_synced: str | None, instants: Sequence[Instant]) -> bool:
    """A full listing is needed when nothing was synced; when instants after the last sync may have
    been archived (HUDI-5816: the range cannot be read); when the synced instant is not on the
    timeline at all (the table was re-created at its path, or the instant rolled back); or when a
    restore or a rollback of a synced commit rewound the table (they remove what commits wrote)."""
    if last_synced is None:
        return True
    start = table.timeline.archived_before()
    if start is not None and last_synced < start:
        return True
    if not any(i.timestamp == last_synced for i in table.timeline.completed_writes()):
        return True
    for inst in instants:
        if inst.action == RESTORE:
            return True
        if inst.action == ROLLBACK:
            try:
                record = read_record(table.timeline.read_bytes(inst), source=table.timeline.path_of(inst))
            except HudiInstantNotFoundError:
                return True
            if any(str(t) <= last_synced for t in record.get("commitsRollback") or ()):
                return True
    return False


def partition_changes(table: HudiTable, *, last_synced: str | None, last_synced_completion: str | None = None,
                      catalog_partitions: Iterable[str] | None = None, full: bool = False) -> PartitionChanges:
    """The partition changes since the catalog's last sync (``last_commit_time_sync``, and
    ``last_commit_completion_time_sync`` on layout-2 tables).

    Incremental: the partitions written, replaced or cleaned by completed instants after the last
    sync are listed; live ones are added (absent from ``catalog_partitions``) or updated, the others
    dropped. With ``catalog_partitions`` (the catalog's partitions, or at least those among the
    touched ones) drops are limited to what the catalog holds, so a re-run over a clean that emptied
    a partition already dropped asks for nothing. Without them, a partition counts as added when it
    was not live as of the last sync (a catalog treats re-adding as done), and every non-live touched
    partition is reported dropped.

    Full (no last sync, the range archived, a restore in it, or ``full=True``): the live partitions
    of a full listing against ``catalog_partitions`` (all of them): live but absent → added, present
    but not live → dropped; ``updated`` stays empty (locations are the catalog's to compare).
    """
    timeline = table.timeline
    writes = timeline.completed_writes()
    newest = writes[-1] if writes else None
    synced = newest.timestamp if newest is not None else last_synced
    # the latest completion, which need not be the newest request's (Hudi records the maximum)
    completions = [i.completion_time for i in writes if i.completion_time]
    synced_completion = max(completions) if completions else last_synced_completion
    catalog = None if catalog_partitions is None else {p for p in catalog_partitions if p}
    instants = [] if last_synced is None else _range(table, last_synced, last_synced_completion)
    if full or _needs_full(table, last_synced, instants):
        live = live_partitions(table)
        known = catalog or set()
        return PartitionChanges(added=tuple(sorted(live - known)), updated=(),
                                dropped=tuple(sorted(known - live)), last_synced=synced, full=True,
                                last_synced_completion=synced_completion)
    written, touched = _touched(table, instants)
    live = live_partitions(table, touched)
    gone = touched - live
    if catalog is not None:
        added = live - catalog
        updated = (live & written) & catalog
        dropped = gone & catalog
    else:
        completed_by = last_synced_completion if timeline.layout_version >= 2 else None
        before = live_partitions(table, live, as_of=last_synced, completed_by=completed_by)
        added = live - before
        updated = (live & written) & before
        dropped = gone
    return PartitionChanges(added=tuple(sorted(added)), updated=tuple(sorted(updated)),
                            dropped=tuple(sorted(dropped)), last_synced=synced, full=False,
                            last_synced_completion=synced_completion)


def partition_values(path: str, fields: Sequence[str], *, hive_style: bool, extractor: str | None = None) -> list[str]:
    """The catalog values of a relative partition path, as Hudi's extractor gives them
    (docs/catalog-sync.md §3.3). ``extractor`` names the class (simple name is enough); unset, it is
    inferred as Hudi infers it: no fields → ``NonPartitionedExtractor`` (``[]``); one field and hive
    style → ``HiveStylePartitionValueExtractor`` (one ``k=v``); one field otherwise →
    ``SinglePartPartitionValueExtractor`` (the whole path, slashes included); several fields →
    ``MultiPartKeysValueExtractor`` (each ``/`` segment, ``k=v`` → ``v``). The value count must equal
    the field count: a catalog would otherwise file the partition under the wrong columns."""
    kind = (extractor or "").rsplit(".", 1)[-1]
    if not kind:
        kind = ("NonPartitionedExtractor" if not fields else "MultiPartKeysValueExtractor" if len(fields) > 1
                else "HiveStylePartitionValueExtractor" if hive_style else "SinglePartPartitionValueExtractor")
    if kind == "NonPartitionedExtractor":
        return []
    if kind == "SinglePartPartitionValueExtractor":
        values = [path]
    elif kind == "HiveStylePartitionValueExtractor":
        pieces = path.split("=")  # as Hudi's extractor: exactly one '=', slashes in the value kept
        if len(pieces) != 2:
            raise HudiPartitionValueError(f"partition path {path!r} is not one hive-style 'field=value'")
        values = [pieces[1]]
    elif kind == "SlashEncodedDayPartitionValueExtractor":
        parts = [seg.split("=")[-1] for seg in path.split("/")]
        if len(parts) != 3:
            raise HudiPartitionValueError(f"partition path {path!r} is not yyyy/mm/dd")
        values = ["-".join(parts)]
    else:
        values = []
        for segment in path.split("/") if path else []:
            if "=" in segment:
                parts = segment.split("=")
                if len(parts) != 2:
                    raise HudiPartitionValueError(
                        f"partition path segment {segment!r} of {path!r} has more than one '='")
                values.append(parts[1])
            else:
                values.append(segment)
    if len(values) != len(fields):
        raise HudiPartitionValueError(
            f"partition path {path!r} gives {len(values)} values for {len(fields)} partition fields {list(fields)}")
    return values


def partition_location(base_path: str, path: str) -> str:
    """Where a catalog points a partition: the table's base path (scheme kept) joined with the
    relative partition path, without a trailing slash (Hudi's ``base + "/" + path``)."""
    base = base_path.rstrip("/")
    return posixpath.join(base, path) if path else base
