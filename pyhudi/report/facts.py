"""The figures a report and the advisor work from, read from the timeline and the file listing.

Everything here comes from what every Hudi writer records: instant files (and their modification
times), commit metadata (write statistics per file), rollback metadata, ``hoodie.properties`` and
the latest file slices. pyhudi's own writes add a few entries to a commit's ``extraMetadata``:
the index statistics (``pyhudi.index.stats``), the time of each write phase
(``pyhudi.write.phases``) and the ``hoodie.*`` options the writer set (``pyhudi.write.options``);
tables other writers made simply lack those figures.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.index import INDEX_STATS_KEY
from pyhudi.instant_time import parse_instant_time
from pyhudi.table.table import HudiTable
from pyhudi.timeline.archive import has_archive
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import RESTORE, ROLLBACK, WRITE_ACTIONS, Instant
from pyhudi.write.result import OPTIONS_KEY, PHASES_KEY

#: operations that bring records in (amplification is measured against them); the rest are services
INGEST_OPERATIONS = frozenset({"UPSERT", "INSERT", "BULK_INSERT", "DELETE", "UPSERT_PREPPED", "INSERT_PREPPED",
                               "INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE"})


@dataclass(frozen=True)
class InstantFacts:
    """One instant of the active timeline (or one a rollback undid, ``state`` ``ROLLED_BACK``)."""

    timestamp: str
    action: str
    state: str  # COMPLETED, INFLIGHT, REQUESTED or ROLLED_BACK
    requested_at: dt.datetime
    completed_at: dt.datetime | None = None
    operation: str | None = None
    records_written: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    bytes_written: int = 0
    files_written: int = 0
    files_created: int = 0
    partitions: int = 0
    write_errors: int = 0
    incoming_bytes: float = 0.0
    index: Mapping[str, Any] | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    options: Mapping[str, str] = field(default_factory=dict)
    undone: tuple[str, ...] = ()  # rollback or restore: the instants it undid

    @property
    def seconds(self) -> float | None:
        """From requested to completed (None while pending)."""
        if self.completed_at is None:
            return None
        return max(0.0, (self.completed_at - self.requested_at).total_seconds())

    @property
    def is_ingest(self) -> bool:
        return self.operation in INGEST_OPERATIONS

    @property
    def amplification(self) -> float | None:
        """Bytes written per byte of incoming records (a record's bytes as the file it went to
        stores it): 1 for appends, the rewritten file's share for copy-on-write updates."""
        if not self.is_ingest or self.incoming_bytes <= 0:
            return None
        return self.bytes_written / self.incoming_bytes


@dataclass(frozen=True)
class SliceFacts:
    """The latest file slice of one file group."""

    partition: str
    file_id: str
    base_bytes: int  # 0: no base file (a log-only slice)
    log_bytes: int
    log_files: int

    @property
    def log_to_base(self) -> float | None:
        return self.log_bytes / self.base_bytes if self.base_bytes else None


@dataclass(frozen=True)
class TableFacts:
    path: str
    name: str
    table_type: str
    properties: Mapping[str, str]
    instants: list[InstantFacts]
    slices: list[SliceFacts]
    options: Mapping[str, str]  # the hoodie.* options the latest pyhudi write set
    max_file_size: int
    small_file_limit: int
    archived_before: str | None  # instants before this were archived

    def writes(self) -> list[InstantFacts]:
        return [i for i in self.instants if i.state == "COMPLETED" and i.action in WRITE_ACTIONS]

    def ingests(self) -> list[InstantFacts]:
        return [i for i in self.writes() if i.is_ingest]

    def setting(self, opt: C.ConfigOption[Any]) -> Any:
        """An option's value as the latest write ran with it (its default when not set)."""
        return HudiConfig.of({k: v for k, v in self.options.items() if k == opt.key}, warn_unknown=False).get(opt)


def gather(table: HudiTable) -> TableFacts:
    """The figures of ``table``: its active timeline and its latest file slices."""
    timeline = table.timeline
    utc = table.config.utc_timeline
    instants: list[InstantFacts] = []
    undone: dict[str, str] = {}  # instant a rollback or restore undid -> its action
    requested = _requested_times(table)
    for inst in timeline.instants():
        targets = _undone(timeline, inst) if inst.is_completed and inst.action in (ROLLBACK, RESTORE) else {}
        facts = _instant(table, inst, utc, requested, tuple(targets))
        if facts is None:
            continue
        instants.append(facts)
        undone.update(targets)
    # writes a rollback or restore undid: known by time and, where recorded, action
    for target in sorted(set(undone) - {i.timestamp for i in instants}):
        when = _parse_time(target, utc)
        if when is not None:
            instants.append(InstantFacts(target, undone[target], "ROLLED_BACK", when))
    instants.sort(key=lambda i: i.timestamp)
    view = table.file_system_view()
    slices = [SliceFacts(s.partition_path, s.file_id, s.base_file.size if s.base_file else 0,
                         sum(lf.size for lf in s.log_files), len(s.log_files)) for s in view.latest_slices()]
    options: Mapping[str, str] = {}
    for facts in reversed(instants):
        if facts.options:
            options = facts.options
            break
    cfg = HudiConfig.of(dict(options), warn_unknown=False)
    first = timeline.first_instant_time() if has_archive(table.storage) else None
    return TableFacts(table.path, table.name, table.table_type, dict(table.config.props), instants, slices,
                      dict(options), cfg.get(C.PARQUET_MAX_FILE_SIZE), cfg.get(C.PARQUET_SMALL_FILE_LIMIT), first)


def _parse_time(ts: str, utc: bool) -> dt.datetime | None:
    """An instant time as a local wall-clock time (None for times that are not dates, such as
    bootstrap's ``00000000000001``)."""
    try:
        moment = parse_instant_time(ts)
    except ValueError:
        return None
    if moment.year < 1971:
        return None
    return moment.replace(tzinfo=dt.timezone.utc).astimezone().replace(tzinfo=None) if utc else moment


def _local(mtime_ns: int | None) -> dt.datetime | None:
    """A file's modification time as a local wall-clock time. Durations and positions come from
    file times, which do not depend on the zone the writer wrote instant times in."""
    if not mtime_ns:
        return None
    return dt.datetime.fromtimestamp(mtime_ns / 1e9)


def _requested_times(table: HudiTable) -> dict[str, int]:
    """Instant time -> when its earliest pending state file was written (a compaction is requested
    as ``compaction`` and completed as ``commit``)."""
    out: dict[str, int] = {}
    for i in table.timeline.instant_files:
        mtime = table.timeline.mtime_ns(i)
        if not i.is_completed and mtime:
            out[i.timestamp] = min(out.get(i.timestamp, mtime), mtime)
    return out


def _instant(table: HudiTable, inst: Instant, utc: bool, requested: dict[str, int],
             undone: tuple[str, ...]) -> InstantFacts | None:
    timeline = table.timeline
    completed = _local(timeline.mtime_ns(inst)) if inst.is_completed else None
    started = _local(requested.get(inst.timestamp)) or completed or _parse_time(inst.timestamp, utc)
    if started is None:
        return None
    if not inst.is_completed:
        return InstantFacts(inst.timestamp, inst.action, inst.state.name, started)
    if inst.action in WRITE_ACTIONS:
        meta = timeline.commit_metadata(inst)
        stats = meta.write_stats()
        # a delete counts as a record of its file (a copy-on-write file rewritten for deletes only)
        incoming = sum((s.numInserts + s.numUpdateWrites + s.numDeletes) * s.totalWriteBytes / s.numWrites
                       for s in stats if s.numWrites)
        extra = meta.extra_metadata
        return InstantFacts(
            inst.timestamp, inst.action, "COMPLETED", started, completed, operation=meta.operation_type,
            records_written=meta.total("numWrites"), inserts=meta.total("numInserts"),
            updates=meta.total("numUpdateWrites"), deletes=meta.total("numDeletes"),
            bytes_written=meta.total("totalWriteBytes"), files_written=len(stats),
            files_created=sum(1 for s in stats if s.prevCommit in ("null", None, "")),
            partitions=len(meta.partition_to_write_stats), write_errors=meta.total("totalWriteErrors"),
            incoming_bytes=incoming, index=_json(extra.get(INDEX_STATS_KEY)), phases=_json(extra.get(PHASES_KEY)) or {},
            options=_json(extra.get(OPTIONS_KEY)) or {})
    return InstantFacts(inst.timestamp, inst.action, "COMPLETED", started, completed, undone=undone)


def _undone(timeline: Any, inst: Instant) -> dict[str, str]:
    """Instant time -> action of each instant a completed rollback or restore undid (``commit``
    where its metadata does not say)."""
    data = timeline.read_bytes(inst)
    record = read_record(data) if data else {}
    actions = {str(e.get("commitTime")): str(e.get("action") or "commit") for e in record.get("instantsRollback") or []}
    entries = record.get("commitsRollback" if inst.action == ROLLBACK else "instantsToRollback") or []
    out = {}
    for entry in entries:
        if isinstance(entry, dict):
            out[str(entry.get("commitTime"))] = str(entry.get("action") or "commit")
        else:
            out[str(entry)] = actions.get(str(entry), "commit")
    return out


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
