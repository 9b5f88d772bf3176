"""Bulk insert and the replace writes: records sized into new files per table partition, with no
index lookup, and the file groups a replace (insert_overwrite, delete_partition) retires."""

from __future__ import annotations

import time
from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.spark.prepare import combines, may_flag_deletes, parallelism, prepare
from pyhudi.spark.routing import bulk_insert_task, route, spark_parallelism
from pyhudi.spark.sizing import record_size
from pyhudi.spark.state import WriteState
from pyhudi.spark.worker import map_in_arrow
from pyhudi.timeline.instant import REPLACE_COMMIT
from pyhudi.write.bulk_insert import bulk_insert_writer, plan_bulk_insert, slot_bounds
from pyhudi.write.columns import IS_DELETE, STATS_DDL
from pyhudi.write.plan import WriteContext
from pyhudi.write.replace import INSERT_OVERWRITE_TABLE, replaced_file_groups

#: Keys a GLOBAL_SORT bulk insert samples to cut a large table partition into key ranges.
KEY_SAMPLE = 20_000


def bulk_insert(state: WriteState, data: DataFrame, operation: str, ctx: WriteContext,
                replace: str | None) -> tuple[list[dict], dict[str, list[str]] | None]:
    """Records sized into files per table partition (:mod:`pyhudi.write.bulk_insert`): a count
    per partition, a key sample when a partition needs several GLOBAL_SORT slots, then one
    shuffle to the slots' tasks, which sort (unless the sort mode is NONE or
    PARTITION_PATH_REPARTITION) and write."""
    started = time.monotonic()
    prepared_as = "bulk_insert" if operation in ("bulk_insert", "delete") else "insert" if replace else operation
    keyed = prepare(state, data, prepared_as)
    if state.input_counts is not None and not combines(state.cfg, prepared_as) and \
            not may_flag_deletes(data.columns, state.merge_spec(), prepared_as):
        counts = dict(state.input_counts)  # every input row is live: the partition-path check counted them
    else:
        # a replace empties every partition the batch has records in, soft-deleted ones included
        per_partition = keyed.groupBy(PARTITION_PATH).agg(F.sum((~F.col(IS_DELETE)).cast("long")).alias("live"))
        counts = {r[PARTITION_PATH]: r["live"] or 0 for r in per_partition.collect()}
    keyed = keyed.where(~F.col(IS_DELETE))
    started = state.phase("partitions", started)
    mode = state.cfg.get(C.BULKINSERT_SORT_MODE)
    tasks = parallelism(state.cfg, "bulk_insert") or spark_parallelism(data)
    avg, _measured = record_size(state)
    plan = plan_bulk_insert(counts, avg_record_size=avg, parallelism=tasks)
    if mode == "GLOBAL_SORT" and plan.multi_slot:
        plan = plan_bulk_insert(counts, avg_record_size=avg, parallelism=tasks,
                                bounds=key_sample(keyed, plan.multi_slot, counts))
    action = REPLACE_COMMIT if replace else state.write_action
    state.table.timeline.transition_inflight(state.instant, action, b"")
    started = state.phase("plan", started)
    stats = []
    if plan.num_tasks:
        routed = route(keyed, bulk_insert_task(plan), plan.num_tasks)
        if mode not in ("NONE", "PARTITION_PATH_REPARTITION"):
            routed = routed.sortWithinPartitions(PARTITION_PATH, RECORD_KEY)
        expected = plan.expected_rows
        stats = map_in_arrow(routed, lambda it: bulk_insert_writer(it, ctx, expected), STATS_DDL).collect()
    state.phases["tasks"] = plan.num_tasks
    state.phase("write", started)
    return [r.asDict() for r in stats], replaced_groups(state, replace, counts)


def key_sample(keyed: DataFrame, slots: dict[str, int], counts: dict[str, int]) -> dict[str, tuple[str, ...]]:
    """GLOBAL_SORT slot boundaries of the partitions with several slots, from a key sample of
    about :data:`KEY_SAMPLE` keys (at least 20 per slot while the sample stays small)."""
    rows = sum(counts[p] for p in slots)
    fraction = min(1.0, max(KEY_SAMPLE, 20 * sum(slots.values())) / max(1, rows))
    sample: dict[str, list[str]] = {}
    picked = keyed.where(F.col(PARTITION_PATH).isin(list(slots))).select(PARTITION_PATH, RECORD_KEY)
    for r in picked.sample(fraction=fraction, seed=17).collect():
        sample.setdefault(r[0], []).append(r[1])
    return slot_bounds(sample, slots)


def replaced_groups(state: WriteState, replace: str | None,
                    partitions: Iterable[str]) -> dict[str, list[str]] | None:
    """The file groups a replace write retires: the table's, or those of the partitions it wrote."""
    if not replace:
        return None
    if replace == INSERT_OVERWRITE_TABLE:
        return replaced_file_groups(state.table.file_system_view(), None)
    partitions = sorted(set(partitions))
    return replaced_file_groups(state.table.file_system_view(partitions=partitions), partitions)


def deleted_partitions(state: WriteState, data: DataFrame,
                       partitions: tuple[str, ...] | None) -> dict[str, list[str]]:
    """delete_partition: the file groups of ``partitions`` (named by the option, resolved before the
    write began), else of the partitions the batch's records are in."""
    if partitions is None:
        keyed = prepare(state, data, "delete", combine_in_spark=False)
        partitions = tuple(r[PARTITION_PATH] for r in keyed.select(PARTITION_PATH).distinct().collect())
    state.table.timeline.transition_inflight(state.instant, REPLACE_COMMIT, b"")
    return replaced_file_groups(state.table.file_system_view(partitions=list(partitions)), partitions)
