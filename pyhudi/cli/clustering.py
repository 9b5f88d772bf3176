"""``pyhudi clustering show|schedule|run``: clustering plans, as ``hudi-cli``'s ``clustering`` commands.

    pyhudi clustering show --path T [--instant I]     plans (pending and completed), or one plan's groups
    pyhudi clustering schedule --path T [--option hoodie.clustering.plan.strategy.sort.columns=a,b]
    pyhudi clustering run --path T [--instant I]      run a pending plan, or all (scheduling one if none; Spark)
"""

from __future__ import annotations

import argparse

from pyhudi.cli.common import add_plan_commands, human, options_of, table_text
from pyhudi.config import HudiConfig
from pyhudi.plans.clustering import read_clustering_plan
from pyhudi.services.clustering import schedule_clustering
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import CLUSTERING, REPLACE_COMMIT, State


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``clustering`` sub-command and its actions."""
    add_plan_commands(sub, "clustering", "schedule, run and list clustering plans", (
        ("show", "clustering plans, or the groups of one (--instant)"),
        ("schedule", "write a clustering plan of the small file slices"),
        ("run", "run a pending plan (--instant), or all of them (needs Spark)")),
        example="hoodie.clustering.plan.strategy.sort.columns=drone_id,ts")


def clustering_command(table: HudiTable, args: argparse.Namespace) -> str:
    options = options_of(args)
    if args.what == "show":
        return show_clusterings(table, args.instant)
    if args.what == "schedule":
        instant = schedule_clustering(table, HudiConfig.of(options))
        return f"scheduled clustering {instant}" if instant else "nothing to cluster: no small file slices"
    # imported here, not above: only ``run`` needs Spark, and importing pyspark slows every other command
    from pyhudi.spark.clustering_job import cluster
    from pyhudi.spark.session import spark_session

    done = cluster(spark_session(), table.storage, options, instant=args.instant)
    return "\n".join(f"completed clustering {d['instant']}: {d['input_file_groups']} file groups -> "
                     f"{d['output_files']} files, {d['records']} records, {d['seconds']:.1f} s" for d in done) \
        or "nothing to cluster"


def show_clusterings(table: HudiTable, instant: str | None) -> str:
    timeline = table.timeline
    if instant is not None:
        plan = read_clustering_plan(timeline, instant)
        if plan is None:
            return f"{instant} is not a clustering plan of {table.path}"
        rows = [[i, g.partition_path or '""', len(g.slices), sum(len(s.log_files) for s in g.slices),
                 human(g.input_bytes), g.num_output_file_groups] for i, g in enumerate(plan.groups)]
        sort = ",".join(plan.sort_columns) or "(record key)"
        return table_text(["Group", "Partition", "File Slices", "Log Files", "Input", "Output Files"], rows) + \
            f"\nsorted by {sort}"
    rows = []
    for inst in timeline.instant_files:
        if inst.action not in (REPLACE_COMMIT, CLUSTERING) or inst.state != State.REQUESTED:
            continue
        plan = read_clustering_plan(timeline, inst.timestamp)
        if plan is None:
            continue
        state = "COMPLETED" if timeline.is_completed(inst.timestamp) else \
            "INFLIGHT" if timeline.has_state(inst.timestamp, State.INFLIGHT, REPLACE_COMMIT) else "REQUESTED"
        rows.append([inst.timestamp, state, len(plan.groups), sum(len(g.slices) for g in plan.groups),
                     human(sum(g.input_bytes for g in plan.groups)), ",".join(plan.sort_columns) or "-"])
    return table_text(["Instant", "State", "Groups", "File Slices", "Input", "Sort Columns"], rows) \
        if rows else "no clustering plans"
