"""The archived timeline of table versions 8 and 9: Hudi 1.x's LSM timeline in ``.hoodie/timeline/history/``.

Table version 6 archives old instants into Avro log files (:mod:`pyhudi.timeline.archive`);
from version 8 on, archived instants live in parquet files organised as a log-structured merge
tree, one record per instant. What this module writes and reads, as Apache Hudi 1.1 does it
(``hudi-common/.../common/table/timeline/LSMTimeline.java``,
``.../common/model/HoodieLSMTimelineManifest.java``, ``hudi-common/src/main/avro/HoodieLSMTimelineInstant.avsc``,
``.../timeline/MetadataConversionUtils.createLSMTimelineInstant``,
``hudi-client-common/.../client/timeline/versioning/v2/{LSMTimelineWriter,TimelineArchiverV2}.java``):

* **Data files** ``<minT>_<maxT>_<layer>.parquet``: ``HoodieLSMTimelineInstant`` records
  (``instantTime``, ``completionTime``, ``action``: optional strings; ``metadata``, ``plan``:
  optional bytes; ``version``: required int, 1), one per archived *completed* instant, sorted by
  instant time. Written the way Hudi's Avro parquet writer writes them (parquet-avro's schema
  mapping: optional ``BINARY (STRING)``, optional ``BINARY``, required ``INT32``; gzip, the
  ``hoodie.parquet.compression.codec`` default; footer ``parquet.avro.schema`` and
  ``writer.model.name=avro``, no bloom filter, since the archive writer does not populate meta
  fields). Archiving writes layer 0, named after the first and last instant of the batch.
* ``metadata`` holds the bytes of the instant's completed file (the Avro container of layout 2;
  null when the file is empty); ``plan`` the plan of its pending states: a clean's requested
  cleaner plan, a compaction's or log compaction's requested plan, a replace commit's or
  clustering's inflight metadata (else its requested metadata); nothing for other actions.
* **Manifests** ``manifest_<N>``: JSON (Jackson's default pretty printer) listing the live data
  files of snapshot N, ``{"files" : [ {"fileName" : ..., "fileLen" : ...} ]}``. Every change
  (a new layer-0 file, a compaction) writes the next manifest.
* ``_version_``: the decimal N of the latest snapshot. It is the switch: a manifest or data file
  is part of the history only once ``_version_`` names a manifest that lists it. Readers read
  ``_version_`` and fall back to the largest ``manifest_N`` when it is missing or unreadable.
* **Compaction** (``compactAndClean`` after each archival): while a layer holds at least
  ``hoodie.timeline.compaction.batch.size`` (10) files, its oldest files by name (up to that
  many, stopping once they pass ~1 GB, at least two) are merged into one file of the next layer,
  published by a new manifest. Then cleaning keeps the 3 newest manifests plus one per layer
  compacted in this run and deletes the older manifests and every data file none of the kept
  manifests lists.

Crash safety follows Java's order: data file, then manifest, then ``_version_``. A data file
already listed by the latest manifest is not written again (the previous run died after
switching); one that is not is a leftover and is replaced. ``_version_`` is replaced atomically
here (write-then-rename or one PUT) where Java deletes and recreates it; readers see the same.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.config.properties import load_table_config
from pyhudi.errors import HudiCorruptFileError, HudiError
from pyhudi.io.base_file import AVRO_SCHEMA_KEY, HUDI_CODEC_LEVELS
from pyhudi.storage import Storage
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    COMPLETES_AS,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    SAVEPOINT,
    Instant,
    State,
)
from pyhudi.timeline.timeline import META_FOLDER, Timeline

__all__ = ["LSMHistory", "LSMInstant", "Manifest", "append", "archive_active", "clean", "compact_and_clean",
           "has_history", "history_folder", "read_instants", "read_manifest"]

log = logging.getLogger(__name__)

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
_MANIFEST_NAME = re.compile(r"^manifest_(\d+)$")
#: LSMTimeline.ARCHIVE_FILE_PATTERN (Java matches the whole name)
_DATA_NAME = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
#: LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1
LSM_INSTANT_VERSION = 1
#: hoodie.timeline.compaction.batch.size
COMPACTION_BATCH_SIZE = 10
#: manifests LSMTimelineWriter.clean keeps besides one per layer compacted in the same run
RETAINED_MANIFESTS = 3
#: LSMTimelineWriter.MAX_FILE_SIZE_IN_BYTES: a compaction stops adding files past this total
MAX_COMPACTION_BYTES = 1024 * 1024 * 1000

_JSTR = {"type": "string", "avro.java.string": "String"}
#: HoodieLSMTimelineInstant.avsc, as Java's generated class prints it (the footer's Avro schema)
LSM_INSTANT_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieLSMTimelineInstant", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "instantTime", "type": ["null", _JSTR], "default": None},
        {"name": "completionTime", "type": ["null", _JSTR], "default": None},
        {"name": "action", "type": ["null", _JSTR], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": "int", "default": 1},
    ],
}
LSM_INSTANT_SCHEMA_JSON = json.dumps(LSM_INSTANT_SCHEMA, separators=(",", ":"))
#: the parquet columns parquet-avro derives from it: unions with null are optional, strings UTF8
ARROW_SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()), pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()), pa.field("plan", pa.binary()), pa.field("version", pa.int32(), nullable=False),
])


@dataclass(frozen=True)
class LSMInstant:
    """One archived completed instant: a ``HoodieLSMTimelineInstant`` record."""

    instant_time: str
    completion_time: str | None
    action: str
    metadata: bytes | None = None
    plan: bytes | None = None
    version: int = LSM_INSTANT_VERSION

    @property
    def instant(self) -> Instant:
        return Instant(self.instant_time, State.COMPLETED, self.action, self.completion_time)


@dataclass(frozen=True)
class Manifest:
    """One snapshot of the history: its version (-1: none yet) and its live data files (name, length)."""

    version: int
    files: tuple[tuple[str, int], ...] = ()

    @property
    def file_names(self) -> list[str]:
        return [name for name, _ in self.files]


# -- names and paths ---------------------------------------------------------------------------
def history_folder_of(props: Mapping[str, str]) -> str:
    """The history folder of a table with these properties:
    ``.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>`` (``timeline`` and ``history``
    by default), as Hudi's TimelinePathProviderV2 resolves it."""
    return f"{META_FOLDER}/{props.get('hoodie.timeline.path') or 'timeline'}/" \
           f"{props.get('hoodie.timeline.history.path') or 'history'}"


def history_folder(storage: Storage) -> str:
    """The history folder of the table at ``storage`` (the default one without a readable config)."""
    try:
        return history_folder_of(load_table_config(storage).props)
    except HudiError:
        return history_folder_of({})


def data_file_name(min_instant: str, max_instant: str, layer: int) -> str:
    return f"{min_instant}_{max_instant}_{layer}.parquet"


def parse_data_file(name: str) -> tuple[str, str, int] | None:
    """(min instant, max instant, layer) of a data file name; None for any other name."""
    m = _DATA_NAME.match(name)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def _layer(name: str) -> int:
    parsed = parse_data_file(name)
    return parsed[2] if parsed else 0  # LSMTimeline.getFileLayer's default


# -- manifests ---------------------------------------------------------------------------------
def manifest_json(files: Sequence[tuple[str, int]]) -> str:
    """A manifest as Jackson's default pretty printer writes ``HoodieLSMTimelineManifest``."""
    if not files:
        return '{\n  "files" : [ ]\n}'
    entries = ", ".join(f'{{\n    "fileName" : {json.dumps(name)},\n    "fileLen" : {int(length)}\n  }}'
                        for name, length in files)
    return f'{{\n  "files" : [ {entries} ]\n}}'


def parse_manifest(text: str, *, source: str = "manifest") -> tuple[tuple[str, int], ...]:
    if not text.strip():
        return ()  # HoodieLSMTimelineManifest.fromJsonString: empty content is an empty manifest
    try:
        doc = json.loads(text)
        return tuple((str(f["fileName"]), int(f.get("fileLen") or 0)) for f in doc.get("files") or [])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise HudiCorruptFileError(f"{source} is not an LSM timeline manifest: {exc}") from None


def snapshot_versions(storage: Storage, folder: str) -> list[int]:
    """Versions of every ``manifest_N`` in the folder, ascending."""
    found = (_MANIFEST_NAME.match(info.name) for info in storage.list_files(folder))
    return sorted(int(m.group(1)) for m in found if m)


def latest_version(storage: Storage, folder: str) -> int:
    """The latest snapshot version: ``_version_``, else the largest manifest; -1 if there is none."""
    data = storage.read_bytes_or_none(f"{folder}/{VERSION_FILE}")
    if data is not None:
        try:
            return int(data.decode("utf-8").strip())
        except (UnicodeDecodeError, ValueError):
            log.warning("%s holds no version number; using the newest manifest",
                        storage.full(f"{folder}/{VERSION_FILE}"))
    versions = snapshot_versions(storage, folder)
    return versions[-1] if versions else -1


def read_manifest(storage: Storage, folder: str | None = None, version: int | None = None) -> Manifest:
    """The manifest of ``version`` (default: the latest snapshot); an empty one before the first."""
    folder = folder or history_folder(storage)
    version = latest_version(storage, folder) if version is None else version
    if version < 0:
        return Manifest(-1)
    path = f"{folder}/{MANIFEST_PREFIX}{version}"
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        raise HudiCorruptFileError(f"{storage.full(folder)}: {VERSION_FILE} names snapshot {version}, whose "
                                   "manifest is missing") from None
    return Manifest(version, parse_manifest(data.decode("utf-8"), source=storage.full(path)))


def _publish(storage: Storage, folder: str, latest: Manifest, files: Sequence[tuple[str, int]]) -> Manifest:
    """Write the next manifest, then switch ``_version_`` to it (LSMTimelineWriter.createManifestFile)."""
    version = 1 if latest.version < 0 else latest.version + 1
    path = f"{folder}/{MANIFEST_PREFIX}{version}"
    storage.discard(path)  # left by a writer that died before switching the version
    storage.create_new(path, manifest_json(files).encode("utf-8"))
    storage.write_bytes(f"{folder}/{VERSION_FILE}", str(version).encode("utf-8"))
    return Manifest(version, tuple(files))


# -- data files --------------------------------------------------------------------------------
def encode_file(instants: Sequence[LSMInstant], *, codec: str = "gzip") -> bytes:
    """The parquet bytes of a data file holding ``instants`` in the given order."""
    columns = {
        "instantTime": [i.instant_time for i in instants],
        "completionTime": [i.completion_time for i in instants],
        "action": [i.action for i in instants],
        "metadata": [i.metadata for i in instants],
        "plan": [i.plan for i in instants],
        "version": [i.version for i in instants],
    }
    table = pa.table(columns, schema=ARROW_SCHEMA)
    sink = pa.BufferOutputStream()
    codec = codec.lower().replace("uncompressed", "none")
    with pq.ParquetWriter(sink, ARROW_SCHEMA, compression=codec, compression_level=HUDI_CODEC_LEVELS.get(codec),
                          use_dictionary=True, write_statistics=True, store_schema=False,
                          data_page_version="1.0") as writer:
        writer.write_table(table)
        # the footer of parquet-avro's writer: Java readers take the Avro schema from it
        writer.add_key_value_metadata({AVRO_SCHEMA_KEY: LSM_INSTANT_SCHEMA_JSON, "writer.model.name": "avro"})
    return sink.getvalue().to_pybytes()


def decode_file(data: bytes, *, source: str) -> list[LSMInstant]:
    """The records of a data file (columns by name; a column the file lacks reads as its default)."""
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise HudiCorruptFileError(f"{source} is not a readable parquet file: {exc}") from None
    rows = table.num_rows

    def column(name: str, default: Any = None) -> list[Any]:
        return table.column(name).to_pylist() if name in table.column_names else [default] * rows

    times, actions = column("instantTime"), column("action")
    if any(t is None for t in times) or any(a is None for a in actions):
        raise HudiCorruptFileError(f"{source}: an archived instant has no instantTime or action")
    return [LSMInstant(t, c, a, m, p, int(v if v is not None else LSM_INSTANT_VERSION))
            for t, c, a, m, p, v in zip(times, column("completionTime"), actions, column("metadata"),
                                        column("plan"), column("version", LSM_INSTANT_VERSION))]


def read_instants(storage: Storage, folder: str | None = None) -> list[LSMInstant]:
    """Every archived instant of the latest snapshot, sorted by instant time then action.

    An instant archived twice (a run that died after publishing, before deleting the active
    files, is repeated by the next) is kept once, the copy in the newest file winning.
    """
    folder = folder or history_folder(storage)
    found: dict[tuple[str, str], LSMInstant] = {}
    for name in sorted(read_manifest(storage, folder).file_names, key=lambda n: (-_layer(n), n)):
        path = f"{folder}/{name}"
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            raise HudiCorruptFileError(f"{storage.full(folder)}: the latest manifest lists {name}, which is "
                                       "missing") from None
        for inst in decode_file(data, source=storage.full(path)):
            found[(inst.instant_time, inst.action)] = inst
    return [found[k] for k in sorted(found)]


def has_history(storage: Storage, folder: str | None = None) -> bool:
    """Whether the history holds any archived instant file (its latest manifest lists one)."""
    folder = folder or history_folder(storage)
    return latest_version(storage, folder) >= 0 and bool(read_manifest(storage, folder).files)


# -- writing -----------------------------------------------------------------------------------
def append(storage: Storage, instants: Sequence[LSMInstant], *, folder: str | None = None,
           codec: str = "gzip") -> str | None:
    """Archive a batch: one layer-0 file, then the next manifest and ``_version_``
    (LSMTimelineWriter.write). Returns the file name, or None when that file was published
    already by a run that died afterwards (nothing is written then)."""
    if not instants:
        raise ValueError("an archival batch needs at least one instant")
    folder = folder or history_folder(storage)
    batch = sorted(instants, key=lambda i: (i.instant_time, i.action))
    name = data_file_name(batch[0].instant_time, batch[-1].instant_time, 0)
    latest = read_manifest(storage, folder)
    if name in latest.file_names:
        log.info("%s is published already; not writing it again", name)
        return None
    data = encode_file(batch, codec=codec)
    path = f"{folder}/{name}"
    storage.discard(path)  # a leftover of a run that died before publishing it
    storage.create_new(path, data)
    _publish(storage, folder, latest, [*latest.files, (name, len(data))])
    log.info("archived %d instants into %s", len(batch), storage.full(path))
    return name


def _candidates(files: list[tuple[str, int]], batch_size: int) -> list[tuple[str, int]]:
    """LSMTimelineWriter.getCandidateFiles: the oldest files, up to ``batch_size``, stopping once
    their total passes the size cap."""
    out: list[tuple[str, int]] = []
    total = 0
    for name, length in files[:batch_size]:
        if total > MAX_COMPACTION_BYTES:
            break
        total += length
        out.append((name, length))
    return out


def compact_and_clean(storage: Storage, *, folder: str | None = None, batch_size: int = COMPACTION_BATCH_SIZE,
                      retained_manifests: int = RETAINED_MANIFESTS, codec: str = "gzip") -> list[str]:
    """Merge full layers into the next one, layer by layer, then clean (LSMTimelineWriter.compactAndClean).

    Returns the names of the compacted files written."""
    if batch_size < 2:
        raise ValueError(f"hoodie.timeline.compaction.batch.size must be at least 2, got {batch_size}")
    folder = folder or history_folder(storage)
    latest = read_manifest(storage, folder)
    written: list[str] = []
    layer = 0
    while True:
        files = sorted(f for f in latest.files if _layer(f[0]) == layer)
        if len(files) < batch_size:
            break
        chosen = _candidates(files, batch_size)
        if len(chosen) < 2:
            break
        names = [n for n, _ in chosen]
        bounds = [parse_data_file(n) or (n, n, layer) for n in names]
        target = data_file_name(min(b[0] for b in bounds), max(b[1] for b in bounds), layer + 1)
        merged: list[LSMInstant] = []
        for name in names:  # records in file order, as Java copies them
            merged.extend(decode_file(storage.read_bytes(f"{folder}/{name}"), source=storage.full(f"{folder}/{name}")))
        data = encode_file(merged, codec=codec)
        storage.discard(f"{folder}/{target}")
        storage.create_new(f"{folder}/{target}", data)
        kept = [f for f in latest.files if f[0] not in names]
        latest = _publish(storage, folder, latest, [*kept, (target, len(data))])
        log.info("compacted %d layer-%d files of %s into %s", len(names), layer, storage.full(folder), target)
        written.append(target)
        layer += 1
    clean(storage, folder=folder, compacted_layers=layer, retained_manifests=retained_manifests)
    return written


def clean(storage: Storage, *, folder: str | None = None, compacted_layers: int = 0,
          retained_manifests: int = RETAINED_MANIFESTS) -> list[str]:
    """Delete manifests older than the ``retained_manifests + compacted_layers`` newest and every
    data file none of the kept manifests lists (LSMTimelineWriter.clean); returns what went.

    Readers that loaded an older snapshot keep finding its files for a few more archival runs."""
    folder = folder or history_folder(storage)
    versions = snapshot_versions(storage, folder)
    keep = retained_manifests + compacted_layers
    if len(versions) <= keep:
        return []
    kept = sorted(versions, reverse=True)[:keep]
    live = {name for v in kept for name in read_manifest(storage, folder, v).file_names}
    doomed = [f"{folder}/{MANIFEST_PREFIX}{v}" for v in versions if v not in kept]
    doomed += [f"{folder}/{info.name}" for info in storage.list_files(folder)
               if info.name.endswith(".parquet") and info.name not in live]
    for path in doomed:
        storage.discard(path)
    return doomed


# -- the archival step of a layout-2 table -------------------------------------------------------
def _content(timeline: Timeline, instant: Instant | None) -> bytes | None:
    if instant is None:
        return None
    return timeline.read_bytes(instant) or None


def lsm_instant_of(timeline: Timeline, files: Sequence[Instant]) -> LSMInstant:
    """The record of one instant from its active files (requested, inflight, completed), as
    MetadataConversionUtils.createLSMTimelineInstant builds it."""
    by_state = {i.state: i for i in files}
    completed = by_state.get(State.COMPLETED)
    if completed is None:
        raise HudiError(f"instant {files[0].timestamp if files else '?'} has not completed; only completed "
                        "instants are archived")
    requested, inflight = by_state.get(State.REQUESTED), by_state.get(State.INFLIGHT)
    pending = requested or inflight
    plan: bytes | None = None
    pending_action = pending.action if pending is not None else completed.action
    if pending_action == CLEAN:
        plan = _content(timeline, pending)
    elif pending_action in (REPLACE_COMMIT, CLUSTERING):
        plan = _content(timeline, inflight) or _content(timeline, requested)
    elif pending_action in (COMPACTION, LOG_COMPACTION):
        plan = _content(timeline, requested)
    return LSMInstant(completed.timestamp, completed.completion_time, completed.action,
                      _content(timeline, completed), plan)


@dataclass(frozen=True)
class LSMArchiveResult:
    """What one archival run of a layout-2 table did."""

    file: str | None  # the layer-0 file written (None: it was published by an earlier run)
    instants: list[LSMInstant]
    deleted: list[str]  # active timeline files removed, in deletion order
    compacted: list[str]


def archive_active(storage: Storage, timeline: Timeline, files: Sequence[Instant], *,
                   folder: str | None = None, batch_size: int = COMPACTION_BATCH_SIZE) -> LSMArchiveResult:
    """Move completed instants (``files``: every active file of each, all states) of a layout-2
    timeline into the history: one layer-0 file and snapshot, then the active files go (pending
    states first, completed ones in time order, so the active timeline stays a suffix of the
    history), then compaction and cleaning (TimelineArchiverV2.archiveIfRequired)."""
    folder = folder or history_folder(storage)
    groups: dict[tuple[str, str], list[Instant]] = {}
    for inst in files:
        groups.setdefault((inst.timestamp, COMPLETES_AS.get(inst.action, inst.action)), []).append(inst)
    records = [lsm_instant_of(timeline, group) for _, group in sorted(groups.items())]
    if not records:
        return LSMArchiveResult(None, [], [], [])
    written = append(storage, records, folder=folder)
    deleted = []
    pending = sorted((i for i in files if not i.is_completed), key=lambda i: (i.timestamp, i.state))
    completed = sorted((i for i in files if i.is_completed), key=lambda i: i.timestamp)
    for inst in [*pending, *completed]:
        path = timeline.path_of(inst)
        storage.discard(path)
        deleted.append(path)
    timeline.reload()
    compacted = compact_and_clean(storage, folder=folder, batch_size=batch_size)
    return LSMArchiveResult(written, records, deleted, compacted)


# -- reading, as the archived timeline ----------------------------------------------------------
_WRITES = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)
_ROLLING_STAT = "ROLLING_STAT"


class LSMHistory:
    """The archived instants of a layout-2 table, read once (:meth:`reload` refreshes); the
    queries of :class:`pyhudi.timeline.archive.ArchivedTimeline`, so callers take either."""

    def __init__(self, storage: Storage, *, folder: str | None = None) -> None:
        self.storage = storage
        self.folder = folder or history_folder(storage)
        self._records: list[LSMInstant] = []
        self.reload()

    def reload(self) -> LSMHistory:
        self._records = read_instants(self.storage, self.folder)
        return self

    def records(self) -> list[LSMInstant]:
        return list(self._records)

    def instants(self) -> list[Instant]:
        """The archived instants (all completed), sorted; compactions appear as commits."""
        return sorted(r.instant for r in self._records)

    def completed_writes(self) -> list[Instant]:
        return [i for i in self.instants() if i.action in _WRITES]

    def entry(self, instant_time: str, action: str | None = None) -> LSMInstant | None:
        """The record of one instant; without ``action`` a savepoint is only chosen if alone."""
        found = [r for r in self._records if r.instant_time == instant_time and (action is None or r.action == action)]
        if action is None and len(found) > 1:
            found = [r for r in found if r.action != SAVEPOINT] or found
        return found[0] if found else None

    def _decoded(self, data: bytes | None, instant_time: str, what: str) -> dict[str, Any] | None:
        if not data:
            return None
        where = self.storage.full(self.folder)
        return read_record(data, source=f"{what} of archived instant {instant_time} in {where}")

    def metadata(self, instant_time: str, action: str | None = None) -> dict[str, Any] | None:
        """The decoded Avro metadata of an archived instant (commit, clean, rollback metadata...), or None."""
        found = self.entry(instant_time, action)
        return None if found is None else self._decoded(found.metadata, instant_time, "metadata")

    def plan(self, instant_time: str, action: str | None = None) -> dict[str, Any] | None:
        found = self.entry(instant_time, action)
        return None if found is None else self._decoded(found.plan, instant_time, "plan")

    def commit_metadata(self, instant_time: str) -> CommitMetadata | None:
        """The commit metadata of an archived commit/deltacommit/replacecommit, or None."""
        found = self.entry(instant_time)
        if found is None or found.action not in _WRITES or not found.metadata:
            return None
        doc = read_record(found.metadata, source=f"archived commit {instant_time} in {self.storage.full(self.folder)}")
        meta = CommitMetadata.from_dict(doc)
        meta.extra_metadata.pop(_ROLLING_STAT, None)  # blanked by v6 archives converted up
        if doc.get("compacted") is None:  # converted from a v6 archive, which has no such field
            meta.compacted = meta.operation_type == "COMPACT"
        return meta

    def last_instant_time(self) -> str | None:
        instants = self.instants()
        return instants[-1].timestamp if instants else None

