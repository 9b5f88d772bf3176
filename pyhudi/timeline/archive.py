"""The archived timeline (table version 6): old instants moved out of ``.hoodie/`` into log files.

Hudi 0.14 keeps the active timeline short by moving its oldest instants into
``.hoodie/archived/.commits_.archive.<N>_<writeToken>``: Hudi log files (file id ``commits``,
empty base instant, extension ``archive``) of AVRO_DATA blocks whose only header is SCHEMA (the
full ``HoodieArchivedMetaEntry`` schema) and whose records are ``HoodieArchivedMetaEntry``
datums. What this module does, and the Hudi 0.14 source it follows
(``hudi-client-common/.../client/HoodieTimelineArchiver.java``,
``.../client/utils/MetadataConversionUtils.java``, ``.../client/ReplaceArchivalHelper.java``,
``hudi-common/.../table/timeline/HoodieArchivedTimeline.java``,
``hudi-common/.../table/log/HoodieLogFormat.java`` and ``HoodieLogFormatWriter.java``):

* Every file of an archived instant becomes one entry: requested, inflight and completed (for a
  compaction, ``T.compaction.requested``, ``T.compaction.inflight`` and ``T.commit``).
  ``commitTime`` is the instant time, ``actionType`` the file's action, ``actionState`` one of
  ``REQUESTED``/``INFLIGHT``/``COMPLETED``, ``stateTransitionTime`` the file's modification time
  as an instant time; ``version`` stays null (Java never sets it).
* The file's content goes to one field by action and state: commit and deltacommit (any state)
  ``hoodieCommitMetadata``; replacecommit completed ``hoodieReplaceCommitMetadata``, inflight
  ``HoodieInflightReplaceMetadata``, requested ``hoodieRequestedReplaceMetadata`` (the last two
  only when the file is not empty); clean completed ``hoodieCleanMetadata``, pending
  ``hoodieCleanerPlan``; rollback completed ``hoodieRollbackMetadata`` (pending: nothing);
  savepoint ``hoodieSavePointMetadata``; compaction and logcompaction requested
  ``hoodieCompactionPlan`` (inflight: nothing). An empty completed file gets no metadata.
* JSON commit metadata is converted to the Avro ``HoodieCommitMetadata`` by property name (Java
  uses Jackson's ``convertValue``): each write stat keeps the fields the Avro ``HoodieWriteStat``
  has, ``totalLogFiles`` stays null, ``version`` null, ``extraMetadata`` gains ``ROLLING_STAT: ""``
  and a compaction's ``operationType`` becomes ``COMPACT``. An empty (requested) file converts as
  empty metadata.
* Records go in blocks of ``hoodie.commits.archival.batch`` (10) records. The writer is built
  without a log version, so it finds the latest archive file; local file systems and object stores
  cannot append (Hudi's ``StorageSchemes``), so each archival run rolls over to a new file
  ``.commits_.archive.<latest+1>_1-0-1``; on HDFS it appends blocks to the latest file.
* Only after the archive is written are the instant files deleted from ``.hoodie/``.
* Hudi 0.14 never archives savepoint, restore or indexing instants (its archiver selects completed
  commits, cleans and rollbacks only; restore has no conversion at all).

Readers (:class:`ArchivedTimeline`) read every archive file in version order, tolerate a
truncated tail (a writer that died mid-block), resolve each record against the 0.14 schema (older
archives lack newer fields) and de-duplicate entries, as Java collects them into a set.

Tables of versions 8 and 9 (timeline layout 2) archive into the LSM history instead
(:mod:`pyhudi.timeline.lsm_history`): :func:`archive_instants` sends their instants there, and
:func:`archived_timeline` / :func:`has_archive` answer for whichever form the table has.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyhudi.config.properties import load_table_config
from pyhudi.errors import HudiCorruptFileError, HudiError, HudiInstantNotFoundError, HudiUnsupportedError
from pyhudi.instant_time import format_instant
from pyhudi.io.log_format import BlockType, HeaderKey, LogBlock, encode_block, has_valid_tail, read_log_file
from pyhudi.storage import Storage
from pyhudi.timeline.avro_records import (
    ARCHIVED_META_ENTRY,
    CLEAN_METADATA,
    CLEANER_PLAN,
    COMPACTION_PLAN_FULL,
    REQUESTED_REPLACE_METADATA_FULL,
    ROLLBACK_METADATA,
    SAVEPOINT_METADATA,
    WRITE_STAT,
    decode_datum,
    encode_datum,
    read_record,
    schema_json,
)
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
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
from pyhudi.timeline.lsm_history import COMPACTION_BATCH_SIZE as LSM_COMPACTION_BATCH_SIZE
from pyhudi.timeline.lsm_history import LSMHistory, archive_active, has_history, history_folder, history_folder_of
from pyhudi.timeline.timeline import META_FOLDER, Timeline

__all__ = ["ARCHIVE_FOLDER", "ARCHIVAL_BATCH_SIZE", "ArchiveResult", "ArchivedEntry", "ArchivedTimeline",
           "archive_file_name", "archive_instants", "archived_timeline", "commit_metadata_to_avro",
           "list_archive_files", "write_archive_entries"]

log = logging.getLogger(__name__)

#: ``hoodie.archivelog.folder`` (default ``archived``) under the meta folder
ARCHIVE_FOLDER = f"{META_FOLDER}/archived"
ARCHIVE_FILE_ID = "commits"
ARCHIVE_EXTENSION = "archive"
#: ``HoodieLogFormat.UNKNOWN_WRITE_TOKEN``: the token of every archive file Hudi creates
ROLLOVER_WRITE_TOKEN = "1-0-1"
#: ``hoodie.commits.archival.batch``: records per AVRO_DATA block
ARCHIVAL_BATCH_SIZE = 10
#: ``HoodieRollingStatMetadata.ROLLING_STAT_METADATA_KEY``, blanked in every archived commit
ROLLING_STAT_KEY = "ROLLING_STAT"
#: Java's ``HoodieArchivedTimeline.ARCHIVE_FILE_PATTERN`` (version), plus the write token
_ARCHIVE_NAME = re.compile(r"^\.commits_\.archive\.(\d+)(?:_(.*))?$")
_BLOCK_VERSIONS = (2, 3)  # AVRO_DATA content versions with the same layout (count, then sized datums)
#: actions Hudi 0.14's MetadataConversionUtils can turn into an entry
_ARCHIVABLE = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLEAN, ROLLBACK, SAVEPOINT, COMPACTION,
                         LOG_COMPACTION})
#: where ``HoodieArchivedTimeline.getMetadataKey`` finds a completed instant's details
_METADATA_FIELD = {
    CLEAN: "hoodieCleanMetadata", COMMIT: "hoodieCommitMetadata", DELTA_COMMIT: "hoodieCommitMetadata",
    ROLLBACK: "hoodieRollbackMetadata", SAVEPOINT: "hoodieSavePointMetadata",
    COMPACTION: "hoodieCompactionPlan", LOG_COMPACTION: "hoodieCompactionPlan",
    REPLACE_COMMIT: "hoodieReplaceCommitMetadata", INDEXING: "hoodieIndexCommitMetadata",
}
#: HoodieWriteStat (Avro) fields with a long value; the others are strings
_STAT_LONGS = ("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors",
               "totalLogRecords", "totalUpdatedRecordsCompacted", "numInserts", "totalLogBlocks",
               "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes")


def _family(action: str) -> str:
    """The action an instant completes as (Java's ``HoodieInstant.getComparableAction``)."""
    return COMPLETES_AS.get(action, action)


# -- file names --------------------------------------------------------------------------------
def archive_file_name(version: int, write_token: str = ROLLOVER_WRITE_TOKEN) -> str:
    """``.commits_.archive.<version>_<token>``: a log file name with file id ``commits`` and no base instant."""
    return f".{ARCHIVE_FILE_ID}_.{ARCHIVE_EXTENSION}.{version}_{write_token}"


def _archive_version(name: str) -> tuple[int, str] | None:
    m = _ARCHIVE_NAME.match(name)
    return (int(m.group(1)), m.group(2) or "") if m else None


def list_archive_files(storage: Storage, folder: str = ARCHIVE_FOLDER) -> list[str]:
    """The archive files of a table (paths relative to its base), oldest version first."""
    found = []
    for info in storage.list_files(folder):
        key = _archive_version(info.name)
        if key is not None:
            found.append((key, f"{folder}/{info.name}"))
    return [path for _, path in sorted(found)]


def _place(storage: Storage) -> tuple[int, str]:
    """(timeline layout version, archived-timeline folder) of the table, from one config read."""
    props = load_table_config(storage).props
    layout = int(props.get("hoodie.timeline.layout.version")
                 or (2 if int(props.get("hoodie.table.version") or 6) >= 8 else 1))
    if layout >= 2:
        return layout, history_folder_of(props)
    return layout, f"{META_FOLDER}/{props.get('hoodie.archivelog.folder') or 'archived'}"


def legacy_archive_folder(storage: Storage) -> str:
    """The folder of version-6 archive log files (``hoodie.archivelog.folder``, ``archived`` by default)."""
    name = load_table_config(storage).props.get("hoodie.archivelog.folder") or "archived"
    return f"{META_FOLDER}/{name}"


def archive_folder(storage: Storage) -> str:
    """The table's archived-timeline folder: the archive log folder in timeline layout 1, the LSM
    history (``.hoodie/timeline/history``) in layout 2."""
    return _place(storage)[1]


def has_archive(storage: Storage) -> bool:
    """Whether archival moved instants off the table's active timeline (an archive file, or in
    layout 2 a published history file, exists)."""
    layout, folder = _place(storage)
    return has_history(storage, folder) if layout >= 2 else bool(list_archive_files(storage, folder))


def archived_timeline(storage: Storage) -> ArchivedTimeline | LSMHistory:
    """The table's archived timeline in its layout: the archive log files (version 6) or the LSM
    history (versions 8 and 9); both answer ``instants``, ``completed_writes``, ``metadata``,
    ``commit_metadata`` and ``last_instant_time``."""
    layout, folder = _place(storage)
    return LSMHistory(storage, folder=folder) if layout >= 2 else ArchivedTimeline(storage, folder=folder)


# -- conversion --------------------------------------------------------------------------------
def _stat_to_avro(stat: WriteStat) -> dict[str, Any]:
    """A JSON write stat as the Avro HoodieWriteStat, fields in schema order."""
    out: dict[str, Any] = {}
    for f in WRITE_STAT["fields"]:
        name = f["name"]
        if name in _STAT_LONGS:
            out[name] = int(getattr(stat, name) or 0)  # Java's POJO fields are primitive longs
        else:
            out[name] = getattr(stat, name, None)  # totalLogFiles has no JSON counterpart
    return out


def commit_metadata_to_avro(data: bytes | str, *, replace: bool = False, source: str = "commit metadata") -> dict:
    """JSON commit metadata as the Avro ``HoodieCommitMetadata`` (``replace``: ``HoodieReplaceCommitMetadata``).

    Mirrors ``MetadataConversionUtils.convertCommitMetadata`` / ``ReplaceArchivalHelper``: fields
    are matched by name, ``version`` is left null, ``ROLLING_STAT`` is blanked in
    ``extraMetadata`` and a compaction's ``operationType`` becomes ``COMPACT`` (not for replace
    metadata). Empty content (a requested file) converts as empty metadata, as in Java.
    """
    meta = CommitMetadata.from_json(data, source=source)
    extra = dict(meta.extra_metadata)
    extra[ROLLING_STAT_KEY] = ""
    out: dict[str, Any] = {
        "partitionToWriteStats": {p: [_stat_to_avro(s) for s in stats]
                                  for p, stats in meta.partition_to_write_stats.items()},
        "extraMetadata": extra,
        "version": None,
        "operationType": "COMPACT" if meta.compacted and not replace else meta.operation_type,
    }
    if replace:
        out["partitionToReplaceFileIds"] = dict(meta.partition_to_replace_file_ids or {})
    return out


def _meta_entry(instant: Instant, content: bytes, transition_time: str | None, source: str) -> dict[str, Any]:
    """The HoodieArchivedMetaEntry of one instant file (``createMetaWrapper`` of Hudi 0.14)."""
    entry: dict[str, Any] = {f["name"]: None for f in ARCHIVED_META_ENTRY["fields"]}
    entry.update(commitTime=instant.timestamp, actionType=instant.action, actionState=instant.state.name,
                 stateTransitionTime=transition_time)
    if instant.is_completed and not content:
        return entry  # createMetaWrapperForEmptyInstant: a crash left an empty completed file
    action, state = instant.action, instant.state
    if action == CLEAN:
        if state == State.COMPLETED:
            entry["hoodieCleanMetadata"] = read_record(content, CLEAN_METADATA, source=source)
        elif content:
            entry["hoodieCleanerPlan"] = read_record(content, CLEANER_PLAN, source=source)
    elif action in (COMMIT, DELTA_COMMIT):
        entry["hoodieCommitMetadata"] = commit_metadata_to_avro(content, source=source)
    elif action == REPLACE_COMMIT:
        if state == State.COMPLETED:
            entry["hoodieReplaceCommitMetadata"] = commit_metadata_to_avro(content, replace=True, source=source)
        elif content and state == State.INFLIGHT:
            entry["HoodieInflightReplaceMetadata"] = commit_metadata_to_avro(content, source=source)
        elif content:
            entry["hoodieRequestedReplaceMetadata"] = read_record(content, REQUESTED_REPLACE_METADATA_FULL,
                                                                  source=source)
    elif action == ROLLBACK:
        if state == State.COMPLETED:
            entry["hoodieRollbackMetadata"] = read_record(content, ROLLBACK_METADATA, source=source)
    elif action == SAVEPOINT:
        if content:  # the inflight savepoint is empty
            entry["hoodieSavePointMetadata"] = read_record(content, SAVEPOINT_METADATA, source=source)
    elif action in (COMPACTION, LOG_COMPACTION):
        if state == State.REQUESTED and content:
            entry["hoodieCompactionPlan"] = read_record(content, COMPACTION_PLAN_FULL, source=source)
    else:
        raise HudiUnsupportedError(f"{source}: Hudi 0.14 cannot archive {action} instants")
    return entry


def _transition_time(mtime_ns: int | None, utc: bool) -> str | None:
    """A file's modification time as an instant time (Hudi's ``stateTransitionTime``)."""
    if not mtime_ns:
        return None
    seconds = mtime_ns / 1e9
    moment = (dt.datetime.fromtimestamp(seconds, dt.timezone.utc).replace(tzinfo=None) if utc
              else dt.datetime.fromtimestamp(seconds))
    return format_instant(moment)


def _data_block(records: list[dict[str, Any]], schema_text: str) -> bytes:
    """An AVRO_DATA block (content version 3) whose only header is SCHEMA, as the archiver writes."""
    parts = [struct.pack(">ii", 3, len(records))]
    for record in records:
        datum = encode_datum(schema_text, record)
        parts.append(struct.pack(">i", len(datum)))
        parts.append(datum)
    return encode_block(BlockType.AVRO_DATA_BLOCK, {HeaderKey.SCHEMA: schema_text}, b"".join(parts))


def write_archive_entries(storage: Storage, records: list[dict[str, Any]], *, folder: str = ARCHIVE_FOLDER,
                          batch_size: int = ARCHIVAL_BATCH_SIZE) -> str | None:
    """Write ``HoodieArchivedMetaEntry`` records into a new archive file (the next version after
    the latest, as an archival run on a store that cannot append); returns its path (None: no
    records, nothing written)."""
    if not records:
        return None
    schema_text = schema_json(ARCHIVED_META_ENTRY)
    data = b"".join(_data_block(records[i:i + batch_size], schema_text) for i in range(0, len(records), batch_size))
    target, _ = _target_file(storage, folder, False)
    storage.create_new(target, data)
    return target


# -- archiving ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchiveResult:
    """What one archival run did."""

    archive_file: str  # the archive log file written (relative to the table's base path)
    appended: bool  # blocks went to the end of an existing archive file (else a new file)
    entries: list[Instant]  # one per archived instant file, in the order written
    deleted: list[str]  # timeline files removed, in deletion order
    blocks: int = 0

    @property
    def instant_times(self) -> list[str]:
        return sorted({i.timestamp for i in self.entries})


def _files_to_archive(timeline: Timeline, times: Iterable[str]) -> list[Instant]:
    """Every file of each instant (all states, its family of actions), checked archivable."""
    files = timeline.instant_files
    wanted: list[Instant] = []
    for ts in sorted(set(times)):
        at_time = [i for i in files if i.timestamp == ts]
        if not at_time:
            raise HudiInstantNotFoundError(f"instant {ts} is not on the active timeline; nothing to archive")
        # a savepoint shares its time with the commit it saves: that commit stays active
        mine = [i for i in at_time if i.action != SAVEPOINT]
        if mine and len(mine) != len(at_time):
            raise HudiError(f"instant {ts} is savepointed; Hudi keeps savepointed instants on the active timeline "
                            "(delete the savepoint first)")
        mine = mine or at_time
        if not any(i.is_completed for i in mine):
            raise HudiError(f"instant {ts} has not completed; only completed instants can be archived "
                            "(roll it back or let it finish first)")
        families = {_family(i.action) for i in mine}
        if len(families) != 1:
            raise HudiError(f"instant time {ts} is used by several actions ({sorted(families)}); "
                            "the timeline is damaged")
        for inst in mine:
            if inst.action not in _ARCHIVABLE and not (inst.action == CLUSTERING and timeline.layout_version >= 2):
                raise HudiUnsupportedError(f"instant {ts} is a {inst.action}; Hudi 0.14 does not archive {inst.action} "
                                           "instants, they stay on the active timeline")
        wanted.extend(sorted(mine))
    return wanted


def _target_file(storage: Storage, folder: str, append: bool) -> tuple[str, bool]:
    """The archive file to write to and whether to append to it (Hudi's writer builder + rollover)."""
    existing = list_archive_files(storage, folder)
    if existing and append and storage.can_append and has_valid_tail(storage, existing[-1]):
        return existing[-1], True
    latest = _archive_version(existing[-1].rsplit("/", 1)[-1]) if existing else None
    version = latest[0] + 1 if latest else 1
    return f"{folder}/{archive_file_name(version)}", False


def archive_instants(storage: Storage, timeline: Timeline, instants: Iterable[str], *,
                     append: bool = False, batch_size: int = ARCHIVAL_BATCH_SIZE,
                     folder: str = ARCHIVE_FOLDER, utc: bool = False,
                     compaction_batch_size: int = LSM_COMPACTION_BATCH_SIZE) -> ArchiveResult:
    """Move the given completed instants from the active timeline into the archived timeline.

    Writes one ``HoodieArchivedMetaEntry`` per instant file (requested, inflight, completed) into
    AVRO_DATA blocks of ``batch_size`` records, then deletes those files from ``.hoodie/``.
    ``append=False`` (Hudi's behaviour on local file systems and object stores) writes a new
    archive file ``.commits_.archive.<latest+1>_1-0-1``; ``append=True`` (Hudi on HDFS) adds the
    blocks to the latest archive file when the storage can append and that file ends with a
    complete block, and rolls over otherwise. ``utc`` formats the entries' state transition times
    in UTC (``hoodie.table.timeline.timezone=UTC``) instead of local time.

    On a layout-2 timeline (table versions 8 and 9) the instants go to the LSM history as one
    layer-0 file and snapshot, the active files are deleted in the same order, and the history is
    compacted (:func:`pyhudi.timeline.lsm_history.archive_active`, merging a layer once it holds
    ``compaction_batch_size`` files, ``hoodie.timeline.compaction.batch.size``); ``append``,
    ``batch_size`` and ``utc`` do not apply there.

    Crash safety comes from the order of steps. The archive is complete before anything is
    deleted, so a crash leaves the instants on the active timeline (a later run archives them
    again; readers de-duplicate, as Java's do). Then requested and inflight files go, and the
    completed files last, oldest instant first: until its completed file is gone an instant is
    still a completed instant, whereas a completed file deleted before its requested/inflight
    files would leave what looks like a pending or failed write (a compaction to re-run, a write
    to roll back -- deleting committed data). Deleting completed files in time order keeps the
    active timeline a contiguous suffix of the table's history, so data files of instants before
    its first instant stay committed for readers and no hole appears mid-timeline (Hudi 0.14
    deletes pending files, then completed ones, in parallel; 0.15 made the completed step
    sequential in time order for this reason, HUDI-7207).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    timeline.reload()
    files = _files_to_archive(timeline, instants)
    if not files:
        return ArchiveResult("", False, [], [])
    if timeline.layout_version >= 2:  # versions 8 and 9: the LSM history
        lsm_folder = folder if folder != ARCHIVE_FOLDER else history_folder(storage)
        done = archive_active(storage, timeline, files, folder=lsm_folder, batch_size=compaction_batch_size)
        written = f"{lsm_folder}/{done.file}" if done.file else ""
        return ArchiveResult(written, False, files, done.deleted)
    records = []
    for inst in files:  # their modification times as the reload just listed them
        path = timeline.path_of(inst)
        records.append(_meta_entry(inst, storage.read_bytes(path), _transition_time(timeline.mtime_ns(inst), utc),
                                   storage.full(path)))
    schema_text = schema_json(ARCHIVED_META_ENTRY)
    blocks = [_data_block(records[i:i + batch_size], schema_text) for i in range(0, len(records), batch_size)]
    target, appending = _target_file(storage, folder, append)
    data = b"".join(blocks)
    if appending:
        with storage.open_append(target) as out:
            out.write(data)
    else:
        storage.create_new(target, data)
    log.info("archived %d instant files of %d instants into %s", len(files),
             len({i.timestamp for i in files}), target)

    deleted = []
    pending = sorted((i for i in files if not i.is_completed), key=lambda i: (i.timestamp, i.state))
    completed = sorted((i for i in files if i.is_completed), key=lambda i: i.timestamp)
    for inst in [*pending, *completed]:
        path = timeline.path_of(inst)
        storage.discard(path)  # listed by the reload above, under the caller's lock: one DELETE, no probe
        deleted.append(path)
    timeline.reload()
    return ArchiveResult(target, appending, files, deleted, len(blocks))


# -- reading -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchivedEntry:
    """One archived instant file: its instant, the decoded record and the archive file holding it."""

    instant: Instant
    record: dict[str, Any] = field(repr=False)
    file: str

    @property
    def state_transition_time(self) -> str | None:
        return self.record.get("stateTransitionTime")

    @property
    def metadata(self) -> dict[str, Any] | None:
        """The details Hudi's archived timeline exposes for this entry's action."""
        key = _METADATA_FIELD.get(self.instant.action)
        return None if key is None else self.record.get(key)


def _block_records(block: LogBlock, source: str) -> list[dict[str, Any]]:
    where = f"{source}: AVRO_DATA block at byte offset {block.offset}"
    if block.schema is None:
        raise HudiCorruptFileError(f"{where} has no SCHEMA header")
    content = block.content
    if len(content) < 8:
        raise HudiCorruptFileError(f"{where} is {len(content)} bytes, too short")
    version, count = struct.unpack_from(">ii", content, 0)
    if version not in _BLOCK_VERSIONS:
        raise HudiUnsupportedError(f"{where} has content version {version}; pyhudi reads versions 2 and 3")
    records, pos = [], 8
    try:
        for _ in range(count):
            (length,) = struct.unpack_from(">i", content, pos)
            pos += 4
            if length < 0 or pos + length > len(content):
                raise ValueError(f"record length {length} runs past the block")
            records.append(decode_datum(content[pos:pos + length], block.schema, ARCHIVED_META_ENTRY))
            pos += length
    except (struct.error, ValueError, EOFError, LookupError, TypeError) as exc:
        raise HudiCorruptFileError(f"{where}: record {len(records)} of {count} is unreadable ({exc})") from None
    if pos != len(content):
        raise HudiCorruptFileError(f"{where}: {len(content) - pos} bytes follow its {count} records")
    return records


class ArchivedTimeline:
    """The instants of a table's archived timeline, read once (call :meth:`reload` to refresh)."""

    def __init__(self, storage: Storage, *, folder: str = ARCHIVE_FOLDER) -> None:
        self.storage = storage
        self.folder = folder
        self._entries: dict[tuple[str, str, State], ArchivedEntry] = {}
        self.reload()

    def reload(self) -> ArchivedTimeline:
        entries: dict[tuple[str, str, State], ArchivedEntry] = {}
        for path in list_archive_files(self.storage, self.folder):
            source = self.storage.full(path)
            for block in read_log_file(self.storage, path):  # drops a truncated tail with a warning
                if block.block_type != BlockType.AVRO_DATA_BLOCK:
                    continue  # Java reads only Avro data blocks; damaged bytes are CORRUPT blocks
                for record in _block_records(block, source):
                    ts, action = record.get("commitTime"), record.get("actionType")
                    if not ts or not action:
                        raise HudiCorruptFileError(f"{source}: an archived entry has no commitTime/actionType")
                    # very old archives have no actionState; Java treats those entries as completed
                    state = State[record["actionState"]] if record.get("actionState") else State.COMPLETED
                    instant = Instant(ts, state, action)
                    entries[(ts, action, state)] = ArchivedEntry(instant, record, path)  # duplicates: last wins
        self._entries = dict(sorted(entries.items(), key=lambda kv: kv[1].instant))
        return self

    # -- queries -----------------------------------------------------------------------------
    def entries(self) -> list[ArchivedEntry]:
        """Every archived instant file, sorted by time then state."""
        return list(self._entries.values())

    def instant_files(self) -> list[Instant]:
        return [e.instant for e in self._entries.values()]

    def instants(self) -> list[Instant]:
        """The completed archived instants, sorted (one per instant; compactions appear as commits)."""
        return [e.instant for e in self._entries.values() if e.instant.is_completed]

    def completed_writes(self) -> list[Instant]:
        return [i for i in self.instants() if i.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)]

    def entry(self, instant_time: str, action: str | None = None,
              state: State = State.COMPLETED) -> ArchivedEntry | None:
        """The entry of one instant file; without ``action`` a savepoint is only chosen if alone."""
        found = [e for (ts, act, st), e in self._entries.items()
                 if ts == instant_time and st == state and (action is None or act == action)]
        if action is None and len(found) > 1:
            found = [e for e in found if e.instant.action != SAVEPOINT] or found
        return found[0] if found else None

    def metadata(self, instant_time: str, action: str | None = None) -> dict[str, Any] | None:
        """The Avro metadata of a completed archived instant (commit metadata, clean metadata...), or None.

        Commit metadata comes as the Avro ``HoodieCommitMetadata`` dict, whose
        ``partitionToWriteStats`` and ``extraMetadata`` :meth:`CommitMetadata.from_dict` reads.
        """
        found = self.entry(instant_time, action)
        return None if found is None else found.metadata

    def commit_metadata(self, instant_time: str) -> CommitMetadata | None:
        """The commit metadata of an archived commit/deltacommit/replacecommit, or None."""
        found = self.entry(instant_time)
        if found is None or found.instant.action not in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT):
            return None
        doc = found.metadata
        if doc is None:
            return None
        meta = CommitMetadata.from_dict(doc)
        meta.extra_metadata.pop(ROLLING_STAT_KEY, None)
        meta.compacted = meta.operation_type == "COMPACT"
        return meta

    def last_instant_time(self) -> str | None:
        instants = self.instants()
        return instants[-1].timestamp if instants else None
