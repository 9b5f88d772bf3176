"""``pyhudi compaction show|schedule|run``: compaction plans of merge-on-read tables, as ``hudi-cli``'s
``compaction`` commands. Only ``run`` needs Spark."""

from __future__ import annotations

import argparse

from pyhudi.cli.common import add_plan_commands, human, options_of, table_text
from pyhudi.config import HudiConfig
from pyhudi.plans.compaction import read_plan
from pyhudi.services.compaction import schedule_compaction
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import COMPACTION, State


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``compaction`` sub-command and its actions."""
    add_plan_commands(sub, "compaction", "schedule, run and list compactions (merge-on-read)", (
        ("show", "compaction plans, or the file slices of one (--instant)"),
        ("schedule", "write a compaction plan of every file slice with log files"),
        ("run", "run a pending plan (--instant), or all of them (needs Spark)")),
        example="hoodie.compaction.target.io=1024")


def show_compactions(table: HudiTable, instant: str | None) -> str:
    """Compaction plans (pending and completed), or the operations of one plan."""
    if instant is not None:
        plan = read_plan(table.timeline, instant)
        rows = [[op.partition_path or '""', op.file_id, op.base_instant, op.base_file or "", len(op.log_files),
                 human(op.metric("TOTAL_LOG_FILES_SIZE")), f"{op.metric('TOTAL_IO_MB'):.1f}"]
                for op in plan.operations]
        return table_text(["Partition", "File ID", "Base Instant", "Base File", "Log Files", "Log Size",
                           "IO (MB)"], rows)
    rows = []
    for inst in table.timeline.instant_files:
        if inst.action != COMPACTION or inst.state != State.REQUESTED:
            continue
        plan = read_plan(table.timeline, inst.timestamp)
        state = "COMPLETED" if table.timeline.is_completed(inst.timestamp) else \
            table.timeline.find(inst.timestamp).state.name
        rows.append([inst.timestamp, state, len(plan.operations), sum(len(op.log_files) for op in plan.operations),
                     human(sum(op.metric("TOTAL_LOG_FILES_SIZE") for op in plan.operations))])
    return table_text(["Compaction Instant", "State", "File Slices", "Log Files", "Log Size"], rows)


def compaction_command(table: HudiTable, args: argparse.Namespace) -> str:
    options = options_of(args)
    if args.what == "show":
        return show_compactions(table, args.instant)
    if args.what == "schedule":
        instant = schedule_compaction(table, HudiConfig.of(options))
        return f"scheduled compaction {instant}" if instant else "nothing to compact: no file slice has log files"
    # imported here, not above: only ``run`` needs Spark, and importing pyspark slows every other command
    from pyhudi.spark.compaction_job import compact
    from pyhudi.spark.session import spark_session

    done = compact(spark_session(), table.storage, options, instant=args.instant)
    return "\n".join(f"completed compaction {t}" for t in done) or "nothing to compact"
