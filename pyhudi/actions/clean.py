"""Executing a clean plan: delete its files, then complete the clean.

The clean completes through the ``complete`` step its caller hands over (the data table's commit
point, or the metadata table's plain completion when it cleans its own slices), so this module
needs nothing above the timeline to finish an instant.
"""

from __future__ import annotations

import logging
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor

from pyhudi.plans.clean import METADATA_VERSION, CleanPlan, CleanResult
from pyhudi.plans.savepoint import savepointed_files
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import CLEAN_METADATA, read_record, write_record
from pyhudi.timeline.completion import Complete
from pyhudi.timeline.instant import CLEAN, Instant, State

log = logging.getLogger("pyhudi")


def run_clean(table: HudiTable, instant: str, *, complete: Complete) -> CleanResult:
    """Execute a scheduled clean: plan copied to inflight, files deleted, metadata completed
    through ``complete``."""
    started = time.monotonic()
    timeline = table.timeline
    requested = timeline.path_of(Instant(instant, State.REQUESTED, CLEAN))
    plan_bytes = table.storage.read_bytes(requested)
    plan = CleanPlan.from_avro(read_record(plan_bytes))
    if not timeline.has_state(instant, State.INFLIGHT, CLEAN):
        # Hudi 0.x copies the plan into the inflight file; 1.x (timeline layout 2) leaves it empty
        timeline.transition_inflight(instant, CLEAN, plan_bytes if timeline.layout_version < 2 else b"")
    storage = table.storage
    # a savepoint taken after the plan was written protects its files from the plan too
    saved = savepointed_files(timeline)
    paths = [(p, rel) for p, rels in plan.files.items() for rel in rels if posixpath.basename(rel) not in saved]

    def delete(item: tuple[str, str]) -> tuple[str, str, bool]:
        p, rel = item
        storage.discard(rel)  # gone either way (a failure raises): no probe before or after it
        return p, rel, True

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcome = list(pool.map(delete, paths))
    partition_meta = {}
    for p, rels in sorted(plan.files.items()):
        done = [posixpath.basename(rel) for q, rel, ok in outcome if q == p and ok]
        failed = [posixpath.basename(rel) for q, rel, ok in outcome if q == p and not ok]
        partition_meta[p] = {"partitionPath": p, "policy": plan.policy,  # savepointed files stay
                             "deletePathPatterns": [posixpath.basename(r) for r in rels
                                                    if posixpath.basename(r) not in saved],
                             "successDeleteFiles": done, "failedDeleteFiles": failed,
                             "isPartitionDeleted": False}
    deleted = sum(1 for *_, ok in outcome if ok)
    seconds = time.monotonic() - started
    metadata = {
        "startCleanTime": instant,
        "timeTakenInMillis": int(seconds * 1000),
        "totalFilesDeleted": deleted,
        "earliestCommitToRetain": plan.earliest_to_retain[0] if plan.earliest_to_retain else "",
        "lastCompletedCommitTimestamp": plan.last_completed_commit,
        "partitionMetadata": partition_meta,
        "version": METADATA_VERSION,
        "bootstrapPartitionMetadata": {},
    }
    complete(timeline, instant, CLEAN, write_record(CLEAN_METADATA, metadata))
    log.info("clean %s: deleted %d files (%d failed) in %.2f s", instant, deleted, len(outcome) - deleted, seconds)
    return CleanResult(instant, deleted, len(outcome) - deleted,
                       plan.earliest_to_retain[0] if plan.earliest_to_retain else None, seconds)


