"""The active timeline rewritten in the other layout: the timeline part of an upgrade from table
version 6 to 8 and of a downgrade back (docs/hudi-1x-format.md section 6).

Layout 1 keeps instants in ``.hoodie/`` named ``T.action`` with commit metadata as JSON; layout 2
keeps them in ``.hoodie/timeline/`` named ``T_C.action`` (``C``: the completion time) with commit
metadata as Avro, and calls a pending clustering ``clustering`` where layout 1 says
``replacecommit``. Apache Hudi's upgrade moves file by file; here every file of the new layout is
written first (:func:`write_converted`), the table's ``hoodie.properties`` then switches the
layout in one update (the caller's step, the one moment the table changes), and only then are the
old files removed (:func:`remove_old`). A crash before the switch leaves the table as it was (the
next attempt writes the new files again); a crash after it leaves old files no reader of the new
layout looks at, removed by the next attempt.

The archived timeline moves with it (:func:`write_converted_archive`): version 6's archive log
files (``.hoodie/archived``) become the LSM history of versions 8 and 9 (``.hoodie/timeline/history``)
and back, written beside the old form and switched by the same ``hoodie.properties`` update.

Completion times: layout 1 has none but the file's modification time, which becomes ``C`` going
up (as Hudi does; never earlier than ``T``); going down, ``C`` becomes the new file's modification
time where the store lets pyhudi set it (local disk), so that readers of layout 1 who order by it
still see the completion order.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
from dataclasses import dataclass
from typing import Any

from pyhudi.errors import HudiCorruptFileError, HudiUnsupportedError
from pyhudi.instant_time import format_instant, parse_instant_time
from pyhudi.storage import Storage
from pyhudi.timeline import avro_records as R
from pyhudi.timeline import commit_avro
from pyhudi.timeline import lsm_history as lsm
from pyhudi.timeline.archive import (
    ARCHIVAL_BATCH_SIZE,
    ArchivedEntry,
    ArchivedTimeline,
    legacy_archive_folder,
    list_archive_files,
    write_archive_entries,
)
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    COMPLETES_AS,
    DELTA_COMMIT,
    INDEXING,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
)
from pyhudi.timeline.timeline import Timeline

log = logging.getLogger(__name__)

_COMMITS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)


@dataclass(frozen=True)
class Conversion:
    """What :func:`write_converted` wrote: the new files, and the old ones to remove after the switch."""

    written: tuple[str, ...]
    old: tuple[str, ...]


def _completion_from_mtime(mtime_ns: int | None, requested: str, *, utc: bool) -> str:
    if not mtime_ns:
        return requested
    moment = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.timezone.utc)
    if not utc:
        moment = moment.astimezone()
    return max(format_instant(moment.replace(tzinfo=None)), requested)


def _is_clustering(content: bytes, source: str) -> bool:
    return bool(content) and read_record(content, source=source).get("operationType") == "CLUSTER"


def _to_json(content: bytes, source: str) -> bytes:
    return commit_avro.decode(content, source=source).to_json().encode("utf-8") if content else b""


def converted(source: Timeline, target: Timeline, instant: Instant, content: bytes, *,
              utc: bool) -> tuple[Instant, bytes]:
    """``instant`` of ``source`` and its file's content as ``target``'s layout names and holds it."""
    where = source.path_of(instant)
    action, completion = instant.action, instant.completion_time
    if target.layout_version >= 2:
        if instant.is_completed:
            completion = _completion_from_mtime(source.mtime_ns(instant), instant.timestamp, utc=utc)
        elif action == REPLACE_COMMIT:
            requested = content if instant.state == State.REQUESTED else source.storage.read_bytes_or_none(
                source.path_of(instant.with_state(State.REQUESTED))) or b""
            if _is_clustering(requested, where):
                action = CLUSTERING
        if action in _COMMITS and content.lstrip().startswith(b"{") and instant.state != State.REQUESTED:
            content = commit_avro.encode(content, replace=action == REPLACE_COMMIT and instant.is_completed)
    else:
        completion = None
        if action == CLUSTERING:
            action = REPLACE_COMMIT
        if action in _COMMITS and content and not content.lstrip().startswith(b"{") \
                and instant.state != State.REQUESTED:
            content = _to_json(content, where)
    return Instant(instant.timestamp, instant.state, action, completion), content


def write_converted(storage: Storage, *, to_layout: int, utc: bool = False) -> Conversion:
    """Write the active timeline of the table at ``storage`` in layout ``to_layout`` beside the
    current one (which stays as it is); the caller switches ``hoodie.properties`` next."""
    source = Timeline(storage, layout_version=2 if to_layout == 1 else 1, utc=utc)
    target = Timeline(storage, layout_version=to_layout, utc=utc)
    if to_layout >= 2:
        storage.mkdirs(f"{target.folder}/history")  # as Hudi lays out a layout-2 table (no folders on object stores)
    for leftover in target.instant_files:  # an earlier attempt that died before the switch
        storage.discard(target.path_of(leftover))
    written, old = [], []
    for instant in source.instant_files:
        content = source.read_bytes(instant)
        new, data = converted(source, target, instant, content, utc=utc)
        path = target.path_of(new)
        storage.write_bytes(path, data)
        if to_layout == 1 and new.is_completed and instant.completion_time and storage.is_local:
            stamp = parse_instant_time(instant.completion_time)
            seconds = (stamp.replace(tzinfo=dt.timezone.utc) if utc else stamp.astimezone()).timestamp()
            os.utime(storage.full(path), (seconds, seconds))
        written.append(path)
        old.append(source.path_of(instant))
    return Conversion(tuple(written), tuple(old))


def remove_old(storage: Storage, conversion: Conversion) -> None:
    """Delete the files of the layout the table left (after ``hoodie.properties`` switched)."""
    for path in conversion.old:
        storage.discard(path)


# -- the archived timeline ------------------------------------------------------------------------
#: completed action -> (HoodieArchivedMetaEntry field, version-6 schema, layout-2 schema) of its metadata
_COMPLETED_FIELDS: dict[str, tuple[str, Any, Any]] = {
    COMMIT: ("hoodieCommitMetadata", R.COMMIT_METADATA, commit_avro.COMMIT_METADATA),
    DELTA_COMMIT: ("hoodieCommitMetadata", R.COMMIT_METADATA, commit_avro.COMMIT_METADATA),
    REPLACE_COMMIT: ("hoodieReplaceCommitMetadata", R.REPLACE_COMMIT_METADATA, commit_avro.REPLACE_COMMIT_METADATA),
    CLEAN: ("hoodieCleanMetadata", R.CLEAN_METADATA, R.CLEAN_METADATA),
    ROLLBACK: ("hoodieRollbackMetadata", R.ROLLBACK_METADATA, R.ROLLBACK_METADATA),
    SAVEPOINT: ("hoodieSavePointMetadata", R.SAVEPOINT_METADATA, R.SAVEPOINT_METADATA),
    INDEXING: ("hoodieIndexCommitMetadata", R.INDEX_COMMIT_METADATA, R.INDEX_COMMIT_METADATA),
}


def _resolved(record: dict[str, Any], writer: Any, reader: Any) -> dict[str, Any]:
    """``record`` (of ``writer``) as ``reader`` reads it: Avro schema resolution, as Java's
    generated classes read records of another Hudi release (new fields default, unknown ones go)."""
    return R.decode_datum(R.encode_datum(writer, record), writer, reader)


def _lsm_record(group: list[ArchivedEntry]) -> lsm.LSMInstant | None:
    """The LSM record of one archived instant (its entries: requested, inflight, completed), as
    Hudi's upgrade makes it from LegacyArchivedMetaEntryReader's actions.

    The completed entry's metadata becomes the record's Avro ``metadata`` (commit metadata resolved
    to Hudi 1.x's schema), its state transition time the completion time. Java keeps only the
    compaction plan of the pending states (it looks every state up under the completed state's
    field); the cleaner plan and the replace commit's inflight or requested metadata are kept here
    too, as Hudi's own archiver stores them for instants it archives from a layout-2 timeline."""
    by_state = {e.instant.state: e for e in group}
    done = by_state.get(State.COMPLETED)
    if done is None:
        return None
    action, ts = done.instant.action, done.instant.timestamp
    if action not in _COMPLETED_FIELDS:
        raise HudiUnsupportedError(f"archived {action} instant {ts}: pyhudi converts archived commits, cleans, "
                                   "rollbacks, savepoints and indexing instants only")
    key, old, new = _COMPLETED_FIELDS[action]
    value = done.record.get(key)
    metadata = R.write_record(new, _resolved(value, old, new)) if value is not None else None
    requested, inflight = by_state.get(State.REQUESTED), by_state.get(State.INFLIGHT)
    plan_record: tuple[Any, dict[str, Any]] | None = None
    if requested is not None and requested.record.get("hoodieCompactionPlan") is not None:
        plan_record = (R.COMPACTION_PLAN_FULL, requested.record["hoodieCompactionPlan"])
    elif requested is not None and requested.record.get("hoodieCleanerPlan") is not None:
        plan_record = (R.CLEANER_PLAN, requested.record["hoodieCleanerPlan"])
    elif inflight is not None and inflight.record.get("HoodieInflightReplaceMetadata") is not None:
        plan_record = (commit_avro.COMMIT_METADATA, _resolved(inflight.record["HoodieInflightReplaceMetadata"],
                                                              R.COMMIT_METADATA, commit_avro.COMMIT_METADATA))
    elif requested is not None and requested.record.get("hoodieRequestedReplaceMetadata") is not None:
        plan_record = (R.REQUESTED_REPLACE_METADATA_FULL, requested.record["hoodieRequestedReplaceMetadata"])
    plan = R.write_record(*plan_record) if plan_record is not None else None
    # Java: the entry's stateTransitionTime; archives older than Hudi 0.14 have none, and an
    # instant without a completion time would read as never completed: its own time stands in
    completion = done.state_transition_time or ts
    return lsm.LSMInstant(ts, completion, action, metadata, plan)


def _history_files(storage: Storage, folder: str) -> list[str]:
    names = (info.name for info in storage.list_files(folder))
    return [f"{folder}/{n}" for n in names
            if n == lsm.VERSION_FILE or n.startswith(lsm.MANIFEST_PREFIX) or n.endswith(".parquet")]


def v6_archive_to_lsm(storage: Storage, *, batch_size: int = ARCHIVAL_BATCH_SIZE) -> Conversion:
    """Write the version-6 archived timeline of the table at ``storage`` as the LSM history,
    beside it (the caller switches ``hoodie.properties``, then removes the old files).

    As Hudi's upgrade (``UpgradeDowngradeUtils.upgradeToLSMTimeline``): archived instants in
    batches of ``hoodie.commits.archival.batch``, each a layer-0 file and snapshot followed by a
    compaction and cleaning. Batches go in instant-time order (Java takes the archive files newest
    first, so its first files may name a range out of order; readers do not care)."""
    folder = lsm.history_folder(storage)
    for leftover in _history_files(storage, folder):  # an earlier attempt that died before the switch
        storage.discard(leftover)
    source = legacy_archive_folder(storage)
    groups: dict[tuple[str, str], list[ArchivedEntry]] = {}
    for entry in ArchivedTimeline(storage, folder=source).entries():
        inst = entry.instant
        groups.setdefault((inst.timestamp, COMPLETES_AS.get(inst.action, inst.action)), []).append(entry)
    records = []
    for (ts, action), group in sorted(groups.items()):
        record = _lsm_record(group)
        if record is None:
            log.warning("archived %s %s has no completed entry; Hudi cannot carry it to the LSM timeline either",
                        action, ts)
            continue
        records.append(record)
    for start in range(0, len(records), batch_size):
        lsm.append(storage, records[start:start + batch_size], folder=folder)
        lsm.compact_and_clean(storage, folder=folder)
    return Conversion(tuple(_history_files(storage, folder)), tuple(list_archive_files(storage, source)))


def _plan_entries(record: lsm.LSMInstant, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The pending-state entries that carry a record's plan in a version-6 archive."""
    if not record.plan:
        return []
    name = _writer_schema_name(record.plan, source=f"plan of archived instant {record.instant_time}")
    entry = dict(base)
    if record.action in (COMMIT, DELTA_COMMIT) and name == "HoodieCompactionPlan":
        entry.update(actionType=COMPACTION if record.action == COMMIT else LOG_COMPACTION, actionState="REQUESTED",
                     hoodieCompactionPlan=read_record(record.plan, R.COMPACTION_PLAN_FULL))
    elif record.action == CLEAN and name == "HoodieCleanerPlan":
        entry.update(actionType=CLEAN, actionState="REQUESTED",
                     hoodieCleanerPlan=read_record(record.plan, R.CLEANER_PLAN))
    elif record.action == REPLACE_COMMIT and name == "HoodieCommitMetadata":
        entry.update(actionType=REPLACE_COMMIT, actionState="INFLIGHT",
                     HoodieInflightReplaceMetadata=read_record(record.plan, R.COMMIT_METADATA))
    elif record.action == REPLACE_COMMIT and name == "HoodieRequestedReplaceMetadata":
        entry.update(actionType=REPLACE_COMMIT, actionState="REQUESTED",
                     hoodieRequestedReplaceMetadata=read_record(record.plan, R.REQUESTED_REPLACE_METADATA_FULL))
    else:
        return []
    return [entry]


def _writer_schema_name(data: bytes, *, source: str) -> str:
    """The record name a timeline file's Avro header declares (a plan's kind)."""
    import fastavro

    try:
        schema = fastavro.reader(io.BytesIO(data)).writer_schema
    except Exception as exc:  # fastavro raises several unrelated types on bad input
        raise HudiCorruptFileError(f"{source} is not a readable Avro file: {exc}") from None
    name = str(schema.get("name", "")) if isinstance(schema, dict) else ""
    return name.rsplit(".", 1)[-1]


def lsm_to_v6_archive(storage: Storage) -> Conversion:
    """Write the LSM history of the table at ``storage`` as a version-6 archive log file, beside it
    (the caller switches ``hoodie.properties``, then removes the old files).

    Every archived instant becomes a completed ``HoodieArchivedMetaEntry`` whose metadata is the
    record's Avro metadata resolved to the version-6 schema and whose state transition time is its
    completion time (Hudi's downgrade hands the archived instants to its version-1 archiver); a
    record's plan becomes the pending entry that held it (compaction and cleaner plans, a replace
    commit's requested or inflight metadata). Archive files already in the folder (an older
    archive Hudi's upgrade left behind, or an earlier attempt of this one) go with the old files."""
    folder = lsm.history_folder(storage)
    target = legacy_archive_folder(storage)
    records = lsm.read_instants(storage, folder)
    history = _history_files(storage, folder)
    if not records:
        return Conversion((), tuple(history))
    stale = list_archive_files(storage, target)
    entries: list[dict[str, Any]] = []
    for record in records:
        base: dict[str, Any] = {f["name"]: None for f in R.ARCHIVED_META_ENTRY["fields"]}
        base.update(commitTime=record.instant_time, stateTransitionTime=record.completion_time)
        entries.extend(_plan_entries(record, base))
        if record.action not in _COMPLETED_FIELDS:
            raise HudiUnsupportedError(f"archived {record.action} instant {record.instant_time}: table version 6 "
                                       "archives commits, cleans, rollbacks, savepoints and indexing instants only")
        key, old, _new = _COMPLETED_FIELDS[record.action]
        done = dict(base)
        done.update(actionType=record.action, actionState="COMPLETED")
        if record.metadata:
            done[key] = read_record(record.metadata, old, source=f"metadata of archived instant {record.instant_time}")
        entries.append(done)
    written = write_archive_entries(storage, entries, folder=target)
    return Conversion((written,) if written else (), tuple([*history, *stale]))


def write_converted_archive(storage: Storage, *, to_layout: int) -> Conversion:
    """The archived timeline of the table at ``storage`` written in layout ``to_layout`` beside
    the current one (:func:`v6_archive_to_lsm` going up, :func:`lsm_to_v6_archive` going down)."""
    return v6_archive_to_lsm(storage) if to_layout >= 2 else lsm_to_v6_archive(storage)
