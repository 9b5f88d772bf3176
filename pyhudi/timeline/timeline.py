"""The active timeline of a table: which instants exist, in which state, and their metadata.

The timeline is the table's source of truth for visibility: a data file is part of the table only
when the instant that wrote it has completed. Completing an instant is the single atomic step of a
write (one file appearing), so every state transition here writes whole files only.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from pyhudi.errors import HudiCorruptFileError, HudiInstantNotFoundError
from pyhudi.storage import Storage
from pyhudi.storage.parsed import ParsedFiles
from pyhudi.timeline import commit_avro
from pyhudi.timeline.avro_records import REQUESTED_REPLACE_METADATA_FULL, read_record, write_record
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPLETES_AS,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
    new_instant_time,
    parse_instant_file,
)

META_FOLDER = ".hoodie"
#: actions of the commit timeline (their instants write data files)
DATA_ACTIONS = frozenset(WRITE_ACTIONS) | frozenset(COMPLETES_AS)


def _order(instant: Instant) -> tuple[str, int, str, str]:
    """The order of instant files: Instant's own (time, state, action, completion time), as a sort key."""
    return instant.timestamp, instant.state, instant.action, instant.completion_time or ""


#: parsed commit metadata of recently read instant files (path, size, mtime) -> metadata
_PARSED: ParsedFiles[CommitMetadata] = ParsedFiles(64)


def read_avro_record(data: bytes, *, source: str) -> dict:
    """The single record of an Avro object container file written on the timeline."""
    import fastavro

    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as exc:  # fastavro raises several unrelated types on bad input
        raise HudiCorruptFileError(f"{source} is not a readable Avro file: {exc}") from None
    if not records or not isinstance(records[0], dict):
        raise HudiCorruptFileError(f"{source} holds no Avro record")
    return records[0]


class Timeline:
    """A snapshot of the active timeline, reloaded on demand."""

    def __init__(self, storage: Storage, *, layout_version: int = 1, utc: bool = False) -> None:
        """``utc``: the table's timeline time zone is UTC (``hoodie.table.timeline.timezone``), for
        the completion times layout 2 names completed instants with."""
        self.storage = storage
        self.layout_version = layout_version
        self.utc = utc
        self.folder = META_FOLDER if layout_version < 2 else f"{META_FOLDER}/timeline"
        self._files: list[Instant] = []
        self._latest: list[Instant] | None = None  # instants(), kept until the files change
        self._stamps: dict[Instant, tuple[int, int]] = {}
        self._clustering: dict[str, bool] = {}  # replacecommit time -> whether it is a clustering
        self._replace_ops: dict[str, str] = {}  # requested replacecommit time -> its operation (layout 2)
        self.reload()

    def reload(self) -> Timeline:
        found = []
        stamps = {}
        for info in self.storage.list_files(self.folder):
            instant = parse_instant_file(info.name)
            if instant is not None:
                found.append(instant)
                stamps[instant] = (info.size, info.mtime_ns)
        self._set_files(found)
        self._stamps = stamps
        return self

    def _set_files(self, files: Iterable[Instant]) -> None:
        """The instant files, sorted by time then state (by a key of their fields: comparing
        dataclasses runs Python for every comparison, and a commit sorts its timelines often),
        forgetting what was derived from the old ones."""
        self._files = sorted(files, key=_order)
        self._latest = None

    # -- queries -----------------------------------------------------------------------------
    def mtime_ns(self, instant: Instant) -> int | None:
        """When the instant's file was written, as the listing saw it (None: no such file)."""
        stamp = self._stamps.get(instant)
        return stamp[1] if stamp else None

    @property
    def instant_files(self) -> list[Instant]:
        """Every instant state that has a file, sorted by time then state."""
        return list(self._files)

    def instants(self) -> list[Instant]:
        """One entry per instant: its most advanced state (under its completed action's name).

        A savepoint shares its time with the commit it saves; the two are separate instants, and
        the commit comes first.
        """
        if self._latest is not None:
            return list(self._latest)
        latest: dict[tuple[str, str], Instant] = {}
        for inst in self._files:
            key = (inst.timestamp, family(inst.action))
            cur = latest.get(key)
            if cur is None or inst.state > cur.state or (
                    inst.state == cur.state and inst.action in COMPLETES_AS.values()):
                latest[key] = inst
        self._latest = [latest[k] for k in sorted(latest, key=lambda k: (k[0], k[1] == SAVEPOINT, k[1]))]
        return list(self._latest)

    def completed(self, actions: Iterable[str] | None = None) -> list[Instant]:
        wanted = set(actions) if actions is not None else None
        return [i for i in self.instants()
                if i.is_completed and (wanted is None or i.action in wanted)]

    def pending(self, actions: Iterable[str] | None = None) -> list[Instant]:
        wanted = set(actions) if actions is not None else None
        return [i for i in self.instants()
                if not i.is_completed and (wanted is None or i.action in wanted)]

    def pending_writes(self) -> list[Instant]:
        """Pending commits, delta commits and replace commits that are writes. A pending clustering
        (a replacecommit whose requested plan says CLUSTER) is a table service: it adds no records,
        waits to be run rather than rolled back, and does not hold readers or writers back."""
        return [i for i in self.pending(WRITE_ACTIONS) if not (i.action == REPLACE_COMMIT and self.is_clustering(i))]

    def is_clustering(self, instant: Instant) -> bool:
        """Whether a replacecommit is a clustering: in layout 2 its plan is a ``clustering``
        instant (completing as a replacecommit), in layout 1 a replacecommit plan saying CLUSTER."""
        known = self._clustering.get(instant.timestamp)
        if known is None and Instant(instant.timestamp, State.REQUESTED, CLUSTERING) in self._files:
            known = self._clustering[instant.timestamp] = True
        if known is None:
            requested = Instant(instant.timestamp, State.REQUESTED, REPLACE_COMMIT)
            try:
                data = self.storage.read_bytes(self.path_of(requested))
            except FileNotFoundError:
                data = b""
            known = bool(data) and read_avro_record(
                data, source=self.path_of(requested)).get("operationType") == "CLUSTER"
            self._clustering[instant.timestamp] = known
        return known

    def completed_writes(self) -> list[Instant]:
        """Completed commit, deltacommit and replacecommit instants (they make data visible)."""
        return self.completed(WRITE_ACTIONS)

    def latest_completed_write(self) -> Instant | None:
        writes = self.completed_writes()
        return writes[-1] if writes else None

    def last_instant_time(self) -> str | None:
        """The largest instant time in any state: new instants must be greater."""
        return self._files[-1].timestamp if self._files else None

    def first_instant_time(self) -> str | None:
        return self._files[0].timestamp if self._files else None

    def first_data_instant_time(self) -> str | None:
        """The first instant (any state) of the commit timeline, savepointed commits skipped.

        Data files of older instants belong to archived, hence completed, commits. Clean, rollback
        and savepoint instants do not count: archival moves them on their own schedule. A
        savepointed commit stays active while archival may move newer ones
        (``hoodie.archive.beyond.savepoint``), so like Hudi's ``getFirstNonSavepointCommit`` the
        start of the timeline is the first commit without a savepoint.
        """
        saved = {i.timestamp for i in self._files if i.action == SAVEPOINT}
        for inst in self._files:
            if inst.action in DATA_ACTIONS and inst.timestamp not in saved:
                return inst.timestamp
        return None

    def archived_before(self) -> str | None:
        """Data instants older than this that are not on the active timeline were archived, hence
        completed. It is :meth:`first_data_instant_time`, or, when every active data instant is a
        savepointed commit (a restore to a savepoint after archival), the newest of them."""
        first = self.first_data_instant_time()
        if first is not None:
            return first
        data = [i.timestamp for i in self._files if i.action in DATA_ACTIONS]
        return max(data) if data else None

    def find(self, timestamp: str) -> Instant:
        for inst in self.instants():
            if inst.timestamp == timestamp:
                return inst
        raise HudiInstantNotFoundError(
            f"instant {timestamp} is not on the active timeline; run `pyhudi show commits` to list instants")

    def has_state(self, timestamp: str, state: State, action: str | None = None) -> bool:
        """Whether the instant has a file in ``state`` (of ``action``'s family, if given: a savepoint
        shares its time with a commit)."""
        return any(i.timestamp == timestamp and i.state == state
                   and (action is None or family(i.action) == family(action)) for i in self._files)

    def is_completed(self, timestamp: str) -> bool:
        return any(i.timestamp == timestamp and i.is_completed for i in self._files)

    # -- metadata ----------------------------------------------------------------------------
    def path_of(self, instant: Instant) -> str:
        return f"{self.folder}/{instant.file_name(self.layout_version)}"

    def read_bytes(self, instant: Instant) -> bytes:
        """The content of an instant file; :class:`HudiInstantNotFoundError` if it has gone since the
        timeline was listed (another writer archived or rolled the instant back)."""
        try:
            return self.storage.read_bytes(self.path_of(instant))
        except FileNotFoundError:
            raise HudiInstantNotFoundError(
                f"instant {instant} left the active timeline while it was being read (another writer archived "
                "or rolled it back); run again") from None

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """The commit metadata of a completed write instant (JSON in v6, Avro in v8); shared, read-only.

        A commit of 10,000 files has 10,000 write stats, and planning consults the latest commits
        several times (schema, newest file, replaced groups), so parsed metadata is kept per
        instant file, keyed by its path, size and modification time as the listing saw them.
        """
        source = self.path_of(instant)
        stamp = self._stamps.get(instant) if instant.is_completed else None
        key = (self.storage.full(source), *stamp) if stamp is not None else None
        found = _PARSED.get(key) if key is not None else None
        if found is not None:
            return found
        data = self.read_bytes(instant)
        if self.layout_version >= 2:
            meta = commit_avro.decode(data, source=source)
        else:
            meta = CommitMetadata.from_json(data, source=source)
        if key is not None:
            _PARSED.put(key, meta)
        return meta

    # -- transitions ----------------------------------------------------------------------------
    def _content(self, instant: Instant, content: bytes) -> bytes:
        """What the instant's file holds in this layout: layout 2 stores commit-like metadata as
        Avro (a completed replace commit as ``HoodieReplaceCommitMetadata``), everything else as
        given (plans and other metadata are Avro in both layouts; a requested replace commit
        holds its Avro plan)."""
        if self.layout_version >= 2 and instant.action == REPLACE_COMMIT and not instant.is_completed:
            content = self._pending_replace(instant, content)
        if self.layout_version < 2 or instant.action not in WRITE_ACTIONS or not content.lstrip().startswith(b"{"):
            return content
        if instant.state == State.REQUESTED:
            return content
        return commit_avro.encode(content, replace=instant.action == REPLACE_COMMIT and instant.is_completed)

    def _pending_replace(self, instant: Instant, content: bytes) -> bytes:
        """A pending replace commit's file in layout 2, as Hudi 1.x's writers leave it: an
        overwrite's ``T.replacecommit.requested`` is a HoodieRequestedReplaceMetadata with every
        field null (``createRequestedCommitWithReplaceMetadata``; a delete_partition keeps its
        operation type, clusterings are ``clustering`` instants), and an inflight that would be
        empty is a HoodieCommitMetadata of the write's operation."""
        if instant.state == State.REQUESTED:
            op = read_record(content, source=self.path_of(instant)).get("operationType") if content else None
            if op:
                self._replace_ops[instant.timestamp] = op
            if op in (None, "INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE"):
                return write_record(REQUESTED_REPLACE_METADATA_FULL, {
                    "operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None})
            return content
        if content.strip():
            return content
        return commit_avro.encode(CommitMetadata(operation_type=self._replace_ops.get(instant.timestamp, "UNKNOWN")),
                                  replace=False)

    def completion_time(self) -> str:
        """A completion time for an instant completing now (layout 2): later than every instant
        and completion time on the timeline, in the table's time zone, as Hudi takes it under the
        table lock."""
        done = [i.completion_time for i in self._files if i.completion_time]
        return new_instant_time(after=max([*done, self.last_instant_time() or ""]), utc=self.utc)

    def _write(self, instant: Instant, content: bytes, *, must_be_new: bool) -> Instant:
        content = self._content(instant, content)
        path = self.path_of(instant)
        if must_be_new:
            self.storage.create_new(path, content)
        else:
            self.storage.write_bytes(path, content)
        self._set_files({*self._files, instant})
        return instant

    def create_requested(self, timestamp: str, action: str, content: bytes = b"") -> Instant:
        return self._write(Instant(timestamp, State.REQUESTED, action), content, must_be_new=True)

    def transition_inflight(self, timestamp: str, action: str, content: bytes = b"") -> Instant:
        return self._write(Instant(timestamp, State.INFLIGHT, action), content, must_be_new=True)

    def complete(self, timestamp: str, action: str, content: bytes) -> Instant:
        """The commit point: the completed file appears atomically with its full content (in
        layout 2 named with its completion time)."""
        completion = self.completion_time() if self.layout_version >= 2 else None
        return self._write(Instant(timestamp, State.COMPLETED, action, completion), content, must_be_new=True)

    def revert_to_inflight(self, instant: Instant) -> None:
        """Make a completed instant pending again (the first step of undoing it, as Hudi does).

        The inflight file takes the completed file's metadata, so a rollback that dies after this
        step still knows which files the instant wrote; then the completed file goes, and from that
        moment readers no longer see the instant.
        """
        content = self.read_bytes(instant)
        inflight = Instant(instant.timestamp, State.INFLIGHT, instant.action)
        if self.layout_version >= 2 and instant.action in WRITE_ACTIONS:
            # an inflight write holds HoodieCommitMetadata, a completed replace commit the replace record
            content = commit_avro.encode(commit_avro.decode(content, source=self.path_of(instant)), replace=False)
        self.storage.write_bytes(self.path_of(inflight), content)
        self.storage.discard(self.path_of(instant))
        self._set_files({*(i for i in self._files if i != instant), inflight})

    def delete_instant(self, timestamp: str, action: str | None = None) -> list[str]:
        """Remove every file of an instant (completed first, so it turns invisible at once).

        ``action`` limits the removal to that instant's family (a commit and its savepoint share
        a time; rolling back one must not touch the other).
        """
        def doomed(i: Instant) -> bool:
            return i.timestamp == timestamp and (action is None or family(i.action) == family(action))

        removed = []
        for inst in sorted((i for i in self._files if doomed(i)), key=lambda i: -i.state):
            path = self.path_of(inst)
            if self.storage.delete(path):
                removed.append(path)
        self._set_files(i for i in self._files if not doomed(i))
        return removed


def family(action: str) -> str:
    """The action an instant completes as: compaction -> commit, clustering -> replacecommit..."""
    return COMPLETES_AS.get(action, action)


def commit_action_for(table_type: str) -> str:
    """The action of a regular write on a table of this type."""
    return COMMIT if table_type == "COPY_ON_WRITE" else DELTA_COMMIT
