"""Clustering: small file groups rewritten into fewer, larger ones, ordered for the queries.

Scheduling writes ``T.replacecommit.requested`` holding a ``HoodieRequestedReplaceMetadata`` with
operation ``CLUSTER`` and a ``HoodieClusteringPlan``: groups of file slices, each read and
rewritten by one task. The plan follows Hudi's size-based strategy: in every considered partition,
the slices whose base file is under ``...small.file.limit`` (none pending in another plan), largest
first, are packed into groups of at most ``...max.bytes.per.group``, each to be written as about
``size / ...target.file.max.bytes`` files; at most ``...max.num.groups`` groups. Running the plan
(:mod:`pyhudi.spark.clustering`) completes ``T.replacecommit`` naming the input file groups in
``partitionToReplaceFileIds``; until then readers see the old groups.

Writers meeting a pending plan follow ``hoodie.clustering.updates.strategy``. Under Hudi's default
reject strategy a write that updates a planned file group fails before it writes
(:class:`pyhudi.errors.HudiClusteringUpdateError`). Under the allow strategy it writes, and the
clustering, whose plan names the slices as they were, fails at its commit and is rolled back
(:func:`clustering_conflicts`): either way no update is lost. The plan records which writes had
completed when it was made (its ``extraMetadata``), which tells the writes that came after.

A pending clustering is a table service, not a failed write: a writer's rollback of failed writes
leaves it to be run (again) by ``pyhudi clustering run``, which first removes what an interrupted
attempt wrote.

Records are ordered by ``...sort.columns`` (by record key without them): lexicographically, or along
a Z-order or Hilbert curve over the columns' ranks (``hoodie.layout.optimize.strategy``), so that
filters on any of the columns find their rows in few files.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiClusteringUpdateError
from pyhudi.io.avro_schema import RECORD_KEY
from pyhudi.io.file_names import log_path_order
from pyhudi.read.merge import SliceToRead
from pyhudi.table.fs_view import FileSlice, FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import REQUESTED_REPLACE_METADATA_FULL, read_record, write_record
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT, Instant, State, new_instant_time
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.lock import TableLock
from pyhudi.write.markers import list_markers

log = logging.getLogger("pyhudi")

CLUSTER = "CLUSTER"
PLAN_LAST_COMPLETED = "pyhudi.plan.lastCompletedWrite"
PLAN_PENDING_WRITES = "pyhudi.plan.pendingWrites"
EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
MB = 1024 * 1024


@dataclass(frozen=True)
class ClusteringGroup:
    """The file slices one task rewrites (``HoodieClusteringGroup``); paths relative to the table."""

    partition_path: str
    slices: tuple[SliceToRead, ...]
    num_output_file_groups: int
    input_bytes: int


@dataclass(frozen=True)
class ClusteringPlan:
    groups: tuple[ClusteringGroup, ...]
    sort_columns: tuple[str, ...]
    strategy_params: Mapping[str, str]
    preserve_commit_metadata: bool = True
    #: the newest write completed, and the writes pending, when the plan was made (None: unknown,
    #: a plan scheduled by Apache Hudi)
    last_completed: str | None = None
    pending_writes: tuple[str, ...] = ()

    def file_groups(self) -> set[tuple[str, str]]:
        return {(s.partition_path, s.file_id) for g in self.groups for s in g.slices}

    def to_bytes(self, base_uri: str) -> bytes:
        def full(rel: str) -> str:
            return f"{base_uri.rstrip('/')}/{rel}"

        groups = [{
            "slices": [{"dataFilePath": full(s.base_file) if s.base_file else "",
                        "deltaFilePaths": [full(p) for p in s.log_files], "fileId": s.file_id,
                        "partitionPath": s.partition_path, "bootstrapFilePath": "", "version": 1} for s in g.slices],
            "metrics": {"TOTAL_IO_READ_MB": g.input_bytes / MB, "TOTAL_LOG_FILES": float(
                sum(len(s.log_files) for s in g.slices))},
            "numOutputFileGroups": g.num_output_file_groups, "extraMetadata": None, "version": 1,
        } for g in self.groups]
        return write_record(REQUESTED_REPLACE_METADATA_FULL, {
            "operationType": CLUSTER, "version": 1, "extraMetadata": {} if self.last_completed is None else {
                PLAN_LAST_COMPLETED: self.last_completed, PLAN_PENDING_WRITES: ",".join(self.pending_writes)},
            "clusteringPlan": {"inputGroups": groups, "extraMetadata": None, "version": 1,
                               "preserveHoodieMetadata": self.preserve_commit_metadata,
                               "strategy": {"strategyClassName": EXECUTION_STRATEGY,
                                            "strategyParams": dict(self.strategy_params), "version": 1}}})


def read_clustering_plan(timeline: Timeline, instant_time: str) -> ClusteringPlan | None:
    """The clustering plan of a pending replacecommit; None when it is another replace (an overwrite)."""
    requested = Instant(instant_time, State.REQUESTED, REPLACE_COMMIT)
    try:
        data = timeline.storage.read_bytes(timeline.path_of(requested))
    except FileNotFoundError:
        return None
    if not data:
        return None
    record = read_record(data, REQUESTED_REPLACE_METADATA_FULL)
    plan = record.get("clusteringPlan")
    if record.get("operationType") != CLUSTER or not plan:
        return None
    base = _without_scheme(timeline.storage.uri("")).rstrip("/") + "/"

    def rel(path: str | None) -> str | None:
        if not path:
            return None
        bare = _without_scheme(path)
        return bare[len(base):] if bare.startswith(base) else bare

    groups = []
    for g in plan.get("inputGroups") or []:
        slices = tuple(SliceToRead(s.get("partitionPath") or "", s.get("fileId") or "", rel(s.get("dataFilePath")),
                                   # Hudi lists a slice's logs newest first: readers need them oldest first
                                   tuple(sorted((r for r in (rel(p) for p in s.get("deltaFilePaths") or []) if r),
                                                key=log_path_order)))
                       for s in g.get("slices") or [])
        metrics = g.get("metrics") or {}
        groups.append(ClusteringGroup(slices[0].partition_path if slices else "", slices,
                                      int(g.get("numOutputFileGroups") or 1),
                                      int(float(metrics.get("TOTAL_IO_READ_MB", 0)) * MB)))
    params = dict((plan.get("strategy") or {}).get("strategyParams") or {})
    sort = tuple(c.strip() for c in params.get(C.CLUSTERING_SORT_COLUMNS.key, "").split(",") if c.strip())
    extra = record.get("extraMetadata") or {}
    pending = tuple(t for t in (extra.get(PLAN_PENDING_WRITES) or "").split(",") if t)
    return ClusteringPlan(tuple(groups), sort, params, plan.get("preserveHoodieMetadata") is not False,
                          last_completed=extra.get(PLAN_LAST_COMPLETED) if PLAN_LAST_COMPLETED in extra else None,
                          pending_writes=pending)


def _without_scheme(path: str) -> str:
    """A path or URI as scheme-less, slash-free at the start (file:/t, file:///t, /t and s3a://b/t alike)."""
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:(//)?", "", path).lstrip("/")


def pending_clusterings(timeline: Timeline) -> list[tuple[Instant, ClusteringPlan]]:
    """Pending replacecommits that are clustering plans, oldest first."""
    out = []
    for inst in timeline.pending([REPLACE_COMMIT]):
        plan = read_clustering_plan(timeline, inst.timestamp)
        if plan is not None:
            out.append((inst, plan))
    return out


def clustering_file_groups(timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the pending clustering that rewrites the group."""
    return {g: inst.timestamp for inst, plan in pending_clusterings(timeline) for g in plan.file_groups()}


def writes_since_plan(timeline: Timeline, instant_time: str, plan: ClusteringPlan) -> list[Instant]:
    """Completed writes that had not completed when the plan ``instant_time`` was made."""
    out = []
    # Hudi's plan has no record of the writes under way: a write after it, or one completed after it was written
    planned_at = timeline.mtime_ns(Instant(instant_time, State.REQUESTED, REPLACE_COMMIT)) or 0
    for w in timeline.completed_writes():
        if w.timestamp == instant_time:
            continue
        if plan.last_completed is None:
            after = w.timestamp > instant_time or (timeline.mtime_ns(w) or 0) >= planned_at
        else:
            after = w.timestamp > plan.last_completed or w.timestamp in plan.pending_writes
        if after:
            out.append(w)
    return out


def clustering_conflicts(timeline: Timeline, instant_time: str,
                         plan: ClusteringPlan) -> dict[str, list[tuple[str, str]]]:
    """Writes completed since the plan was made that changed or replaced its file groups (the
    clustering, which rewrites the slices the plan names, would drop their changes): write -> groups."""
    from pyhudi.transaction.conflict import touched_file_groups

    groups = plan.file_groups()
    out = {}
    for w in writes_since_plan(timeline, instant_time, plan):
        hit = sorted(touched_file_groups(timeline.commit_metadata(w)) & groups)
        if hit:
            out[w.timestamp] = hit
    return out


def allows_updates(cfg: HudiConfig) -> bool:
    """Whether writes may update file groups of pending clusterings (Hudi's allow update strategy)."""
    return cfg.get(C.CLUSTERING_UPDATES_STRATEGY) == C.UPDATE_STRATEGIES[1]


def describe_groups(groups: list[tuple[str, str]], limit: int = 5) -> str:
    """``partition/fileId`` of the first ``limit`` file groups, for error messages."""
    shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in groups[:limit])
    return shown + (f" and {len(groups) - limit} more" if len(groups) > limit else "")


def update_refused(instant: str, path: str, hit: list[tuple[str, str]], plans: Iterable[str], *,
                   written: bool) -> HudiClusteringUpdateError:
    """The error of a write refused for updating file groups that clustering ``plans`` rewrite."""
    outcome = "it was rolled back" if written else "nothing was written"
    return HudiClusteringUpdateError(
        f"write {instant} to {path} updates file groups that clustering {', '.join(sorted(set(plans)))} rewrites "
        f"({describe_groups(hit)}); {outcome}. "
        "Run the clustering first (`pyhudi clustering run`), then the write again, or let writes go on beside "
        f"clusterings with {C.CLUSTERING_UPDATES_STRATEGY.key}=SparkAllowUpdateStrategy")


def guard_updates(table: HudiTable, cfg: HudiConfig, instant: str, updated: set[tuple[str, str]]) -> None:
    """Before a write writes its files: what its updates of pending clusterings' file groups do,
    by ``hoodie.clustering.updates.strategy`` (Hudi's ``UpdateStrategy.handleUpdate``)."""
    clustered = clustering_file_groups(table.timeline)
    hit = sorted(updated & set(clustered))
    if not hit:
        return
    plans = sorted({clustered[g] for g in hit})
    if not allows_updates(cfg):
        raise update_refused(instant, table.path, hit, plans, written=False)
    if not cfg.get(C.CLUSTERING_ROLLBACK_PENDING_ON_CONFLICT):
        log.info("write %s updates file groups of pending clustering %s; the clustering will fail at its commit",
                 instant, ", ".join(plans))
        return
    from pyhudi.services.rollback import rollback_instant
    from pyhudi.transaction.heartbeat import HeartbeatPolicy, is_alive

    policy = HeartbeatPolicy.of(cfg)
    undone = []
    with TableLock(table.path, cfg).held():
        timeline = table.timeline.reload()
        for inst, _plan in pending_clusterings(timeline):
            if inst.timestamp not in plans:
                continue
            if inst.state == State.INFLIGHT and is_alive(table.storage, inst.timestamp, policy):
                continue  # running now: it fails at its commit instead (its tasks may still write files)
            rollback_instant(table.storage, timeline, inst, utc=table.config.utc_timeline)
            undone.append(inst.timestamp)
            timeline = timeline.reload()
    if undone:
        log.warning("write %s rolled back pending clustering %s, whose file groups it updates (%s)", instant,
                    ", ".join(undone), C.CLUSTERING_ROLLBACK_PENDING_ON_CONFLICT.key)


def considered_partitions(partitions: Iterable[str], cfg: HudiConfig) -> list[str]:
    """The partitions a plan looks at, as Hudi picks them: the selected partitions, else those the
    regex matches, then the filter mode."""
    chosen = sorted(partitions)
    if cfg.get(C.CLUSTERING_PARTITION_SELECTED):
        wanted = set(cfg.get(C.CLUSTERING_PARTITION_SELECTED))
        chosen = [p for p in chosen if p in wanted]
    elif cfg.get(C.CLUSTERING_PARTITION_REGEX):
        regex = re.compile(cfg.get(C.CLUSTERING_PARTITION_REGEX))
        chosen = [p for p in chosen if regex.fullmatch(p)]
    mode = cfg.get(C.CLUSTERING_PARTITION_FILTER_MODE)
    if mode == "RECENT_DAYS":
        skip, keep = cfg.get(C.CLUSTERING_SKIP_FROM_LATEST), cfg.get(C.CLUSTERING_LOOKBACK_PARTITIONS)
        newest_first = sorted(chosen, reverse=True)[skip:skip + keep]
        chosen = sorted(newest_first)
    elif mode == "SELECTED_PARTITIONS":
        begin, end = cfg.get(C.CLUSTERING_BEGIN_PARTITION), cfg.get(C.CLUSTERING_END_PARTITION)
        chosen = [p for p in chosen if (begin is None or p >= begin) and (end is None or p <= end)]
    return chosen


def plan_clustering(view: FileSystemView, cfg: HudiConfig, *, busy: set[tuple[str, str]],
                    uncommitted: frozenset[str] = frozenset()) -> ClusteringPlan:
    """Hudi's size-based plan over ``view``; ``busy`` groups (pending compaction or clustering) are
    left out, and so are groups with log files of writes still pending (``uncommitted``: their
    rollback would delete files the plan reads)."""
    limit = cfg.get(C.CLUSTERING_SMALL_FILE_LIMIT)
    per_group, target = cfg.get(C.CLUSTERING_MAX_BYTES_PER_GROUP), cfg.get(C.CLUSTERING_TARGET_FILE_MAX_BYTES)
    max_file = cfg.get(C.PARQUET_MAX_FILE_SIZE)
    groups: list[ClusteringGroup] = []
    for partition in considered_partitions(view.partitions, cfg):
        def size(s: FileSlice) -> int:
            return s.base_file.size if s.base_file is not None else max_file

        eligible = [s for s in view.latest_slices(partition) if (s.partition_path, s.file_id) not in busy
                    and (s.base_file.size if s.base_file is not None else 0) < limit
                    and not any(lf.path in uncommitted for lf in s.log_files)]
        eligible.sort(key=size, reverse=True)
        current: list[FileSlice] = []
        total = 0
        for piece in eligible:
            if current and total + size(piece) > per_group:
                groups.append(_group(partition, current, total, target))
                current, total = [], 0
            current.append(piece)
            total += size(piece)
        if current and (len(current) > 1 or cfg.get(C.CLUSTERING_SINGLE_GROUP)):
            groups.append(_group(partition, current, total, target))
    params = {k: str(v) for k, v in cfg.raw.items() if k.startswith("hoodie.clustering.plan.strategy.")}
    sort = tuple(cfg.get(C.CLUSTERING_SORT_COLUMNS) or ())
    if sort:
        params[C.CLUSTERING_SORT_COLUMNS.key] = ",".join(sort)
    return ClusteringPlan(tuple(groups[:cfg.get(C.CLUSTERING_MAX_NUM_GROUPS)]), sort, params,
                          cfg.get(C.CLUSTERING_PRESERVE_COMMIT_METADATA))


def _group(partition: str, slices: list[FileSlice], total: int, target: int) -> ClusteringGroup:
    return ClusteringGroup(partition, tuple(s.to_read() for s in slices), max(1, math.ceil(total / target)), total)


def schedule_clustering(table: HudiTable, cfg: HudiConfig) -> str | None:
    """Write a clustering plan for ``table`` now; its instant, or None when nothing is worth clustering."""
    from pyhudi.services.compaction import pending_file_groups
    from pyhudi.write.commit import recorded_options

    index = cfg.get(C.INDEX_TYPE) if cfg.is_set(C.INDEX_TYPE) else \
        recorded_options(table.timeline).get(C.INDEX_TYPE.key, "").upper()  # as the table's writers say
    if index == "BUCKET":
        from pyhudi.errors import HudiUnsupportedError

        raise HudiUnsupportedError("clustering a BUCKET-index table would move records out of their buckets' file "
                                   "groups; pyhudi does not cluster such tables (Hudi 0.14 neither, for the simple "
                                   "bucket engine)")
    sort = cfg.get(C.CLUSTERING_SORT_COLUMNS) or ()
    schema = table.arrow_schema()
    problems = [(c, why) for c in sort if (why := sort_column_problem(schema, c))] if schema is not None else []
    if problems:
        from pyhudi.errors import HudiConfigError

        assert schema is not None
        raise HudiConfigError(f"{C.CLUSTERING_SORT_COLUMNS.key}: "
                              + "; ".join(f"cannot sort by {c}: {why}" for c, why in problems)
                              + f" (the table's columns: {', '.join(schema.names)})")
    with TableLock(table.path, cfg).held():
        timeline = table.timeline.reload()
        busy = set(pending_file_groups(timeline)) | set(clustering_file_groups(timeline))
        uncommitted = frozenset(rel for inst in timeline.pending_writes()
                                for rel, _io in list_markers(table.storage, inst.timestamp))
        plan = plan_clustering(table.file_system_view(), cfg, busy=busy, uncommitted=uncommitted)
        if not plan.groups:
            return None
        last = timeline.latest_completed_write()
        plan = dataclasses.replace(plan, last_completed=last.timestamp if last else "",
                                   pending_writes=tuple(i.timestamp for i in timeline.pending_writes()))
        instant = new_instant_time(after=timeline.last_instant_time(), utc=table.config.utc_timeline)
        timeline.create_requested(instant, REPLACE_COMMIT, plan.to_bytes(table.storage.uri("")))
        return instant


def clustering_due(timeline: Timeline, cfg: HudiConfig, *, max_commits: int | None = None,
                   since: str = "") -> bool:
    """Whether ``max_commits`` (default ``hoodie.clustering.inline.max.commits``) writes completed
    since the last clustering (and since ``since``: a plan of the caller's that was rolled back)."""
    last = max([i.timestamp for i in timeline.instants() if i.action == REPLACE_COMMIT and timeline.is_clustering(i)]
               + [since])
    writes = [i for i in timeline.completed([COMMIT, DELTA_COMMIT, REPLACE_COMMIT]) if i.timestamp > last]
    return len(writes) >= (max_commits or cfg.get(C.CLUSTERING_INLINE_MAX_COMMITS))


# -- ordering ------------------------------------------------------------------------------------
def ordering(rows: pa.Table, columns: tuple[str, ...], strategy: str) -> np.ndarray:
    """Row order of ``rows``: by ``columns`` (record key without them), linear or along a curve.
    A column may name a nested field (``a.b``), as Hudi's sort columns may."""
    if not columns:
        return np.asarray(pc.sort_indices(rows, sort_keys=[(RECORD_KEY, "ascending")]))
    keys = sort_key_columns(rows, columns)
    if not on_curve(columns, strategy):
        table = pa.table({**{f"k{i}": k for i, k in enumerate(keys)}, RECORD_KEY: rows.column(RECORD_KEY)})
        order = [(f"k{i}", "ascending", "at_start") for i in range(len(keys))] + [(RECORD_KEY, "ascending", "at_end")]
        return np.asarray(pc.sort_indices(table, sort_keys=order))
    bits = curve_bits(len(columns))
    coords = np.stack([_scaled_rank(k, bits) for k in keys])
    index = curve_index(coords, bits, strategy)
    return np.lexsort((np.asarray(pc.sort_indices(rows, sort_keys=[(RECORD_KEY, "ascending")])).argsort(), index))


def on_curve(columns: tuple[str, ...], strategy: str) -> bool:
    """Whether records are ordered along a curve (Z-order, Hilbert) rather than linearly: a curve
    needs two columns or more."""
    return strategy != "linear" and len(columns) > 1


def curve_bits(dimensions: int) -> int:
    """Bits per coordinate of a curve over ``dimensions`` columns: the index fits 63 bits (a long)."""
    return max(1, min(21, 63 // dimensions))


def curve_index(coords: np.ndarray, bits: int, strategy: str) -> np.ndarray:
    """Position of each point (``coords``: dimensions x points, ``bits`` each) along the curve."""
    return z_order(coords, bits) if strategy == "z-order" else hilbert(coords, bits)


def scaled_ranks(ranks: np.ndarray, top: np.ndarray | int, bits: int) -> np.ndarray:
    """Dense ranks (from 0; ``top`` the largest) spread over ``bits`` bits, so that every column
    spans the same coordinate range whatever its type or number of distinct values."""
    ranks = np.asarray(ranks, dtype=np.float64)
    top = np.asarray(top, dtype=np.float64)
    scale = (1 << bits) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(top > 0, ranks * (scale / np.where(top > 0, top, 1)), 0.0)
    return out.astype(np.uint64)


def sort_key_columns(rows: pa.Table, columns: tuple[str, ...]) -> list[pa.ChunkedArray]:
    """The values of each sort column: nested fields resolved, dictionaries decoded (Arrow sorts
    neither a struct nor a dictionary)."""
    out = []
    for name in columns:
        head, *rest = name.split(".")
        values = rows.column(head)
        for field_name in rest:
            values = pc.struct_field(values, field_name)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        out.append(values)
    return out


def sort_column_problem(schema: pa.Schema, name: str) -> str | None:
    """Why ``name`` cannot be a sort column of ``schema`` (None when it can)."""
    head, *rest = name.split(".")
    if head not in schema.names:
        return "the table has no such column"
    typ = schema.field(head).type
    for field_name in rest:
        if not pa.types.is_struct(typ) or typ.get_field_index(field_name) < 0:
            return f"{head} has no field {name[len(head) + 1:]}"
        typ = typ.field(field_name).type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_nested(typ):
        return f"it is of type {typ}, which has no order; name a field inside it (a.b)"
    return None


def _scaled_rank(column: pa.ChunkedArray, bits: int) -> np.ndarray:
    """Dense ranks of a column (nulls first) spread over ``bits`` bits: every type orders the same way."""
    ranks = np.asarray(pc.rank(column, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense"),
                       dtype=np.int64) - 1
    return scaled_ranks(ranks, int(ranks.max()) if len(ranks) else 0, bits)


def z_order(coords: np.ndarray, bits: int) -> np.ndarray:
    """Morton codes: the bits of the coordinates interleaved, highest first."""
    dims = coords.shape[0]
    out = np.zeros(coords.shape[1], dtype=np.uint64)
    for b in range(bits):
        for d in range(dims):
            bit = (coords[d] >> np.uint64(b)) & np.uint64(1)
            out |= bit << np.uint64(b * dims + (dims - 1 - d))
    return out


def hilbert(coords: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert-curve distances (Skilling's transform of the coordinates, then their bits interleaved)."""
    x = coords.astype(np.uint64).copy()
    dims = x.shape[0]
    m = np.uint64(1 << (bits - 1))
    q = m
    while q > 1:
        p = q - np.uint64(1)
        for i in range(dims):
            high = (x[i] & q) != 0
            flipped = x[0] ^ p
            t = (x[0] ^ x[i]) & p
            x0 = np.where(high, flipped, x[0] ^ t)
            if i:
                x[i] = np.where(high, x[i], x[i] ^ t)
            x[0] = x0
        q >>= np.uint64(1)
    for i in range(1, dims):
        x[i] ^= x[i - 1]
    t = np.zeros(x.shape[1], dtype=np.uint64)
    q = m
    while q > 1:
        t = np.where((x[dims - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    x ^= t
    return z_order(x, bits)
