"""``pyhudi``: inspect a table's timeline, commits and file groups, like ``hudi-cli``.

    pyhudi show commits --path /data/drones
    pyhudi show commit 20240418173551906 --path /data/drones
    pyhudi show file-groups --path /data/drones [--partition 2024-01-01]
    pyhudi show timeline --path /data/drones
    pyhudi show properties --path /data/drones
    pyhudi compaction show --path /data/drones [--instant T]
    pyhudi compaction schedule --path /data/drones
    pyhudi compaction run --path /data/drones [--instant T]
    pyhudi clustering show|schedule|run --path /data/drones [--instant T]
    pyhudi clean --path /data/drones [--option hoodie.clean.commits.retained=5]
    pyhudi archive --path /data/drones [--option hoodie.keep.max.commits=40]
    pyhudi savepoint create|delete|list --path /data/drones [--instant T]
    pyhudi restore --path /data/drones --instant T
    pyhudi rollback --path /data/drones [--instant T]

Everything but ``compaction run`` and ``clustering run`` works on table metadata and files alone (no Spark).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from pyhudi.errors import HudiError
from pyhudi.index import INDEX_STATS_KEY
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import SAVEPOINT, WRITE_ACTIONS
from pyhudi.transaction.conflict import CONFLICT_CHECK_KEY


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths)) + " |", line]
    for r in cells[1:]:
        out.append("| " + " | ".join(c.rjust(w) if c.replace(".", "").replace(" ", "").isalnum()
                                      and c[:1].isdigit() else c.ljust(w) for c, w in zip(r, widths)) + " |")
    out.append(line)
    return "\n".join(out)


def show_commits(table: HudiTable, limit: int) -> str:
    rows = []
    for c in reversed(table.commits()[-limit:] if limit else table.commits()):
        m = c.metadata
        rows.append([c.instant.timestamp, c.instant.action, m.operation_type, human(m.total("totalWriteBytes")),
                     c.files_added, c.files_updated, len(m.partition_to_write_stats), m.total("numWrites"),
                     m.total("numInserts"), m.total("numUpdateWrites"), m.total("numDeletes")])
    return table_text(["CommitTime", "Action", "Operation", "Total Bytes Written", "Total Files Added",
                       "Total Files Updated", "Total Partitions Written", "Total Records Written",
                       "Total Inserts", "Total Update Records Written", "Total Deletes"], rows)


def show_commit(table: HudiTable, instant: str) -> str:
    from pyhudi.cli_timeline import show_service_instant

    inst = table.timeline.find(instant)
    service = show_service_instant(table, inst)
    if service is not None:
        return service
    if not inst.is_completed:
        return f"instant {instant} is {inst.state.name.lower()} ({inst.action}); it has no commit metadata yet"
    meta = table.timeline.commit_metadata(inst)
    rows = []
    for partition, stats in sorted(meta.partition_to_write_stats.items()):
        for s in stats:
            rows.append([partition or '""', s.fileId, s.prevCommit, s.numWrites, s.numInserts, s.numUpdateWrites,
                         s.numDeletes, human(s.totalWriteBytes), s.file_name])
    head = f"{inst.action} {inst.timestamp}  operation={meta.operation_type}\n"
    body = table_text(["Partition Path", "File ID", "Previous Commit", "Records Written", "Inserts",
                       "Updates", "Deletes", "Bytes Written", "File"], rows)
    if meta.partition_to_replace_file_ids:
        replaced = sum(len(v) for v in meta.partition_to_replace_file_ids.values())
        body += f"\nreplaced file groups: {replaced}"
    index = meta.extra_metadata.get(INDEX_STATS_KEY)
    if index:
        body += "\n" + index_text(json.loads(index))
    if inst.action in WRITE_ACTIONS and meta.operation_type != "COMPACT":
        body += "\n" + conflict_text(meta.extra_metadata.get(CONFLICT_CHECK_KEY))
    saved = [sp for sp in table.timeline.completed([SAVEPOINT]) if sp.timestamp == inst.timestamp]
    if saved:  # a savepoint shares its commit's time
        body += "\n" + (show_service_instant(table, saved[0]) or "")
    return head + body


def conflict_text(recorded: str | None) -> str:
    """The conflict check a commit passed (optimistic concurrency control), or that it had none."""
    if not recorded:
        return "conflict check: none (written in single-writer mode)"
    check = json.loads(recorded)
    candidates = check.get("candidates") or []
    seen = ", ".join(candidates) if candidates else "none completed or planned meanwhile"
    return (f"conflict check ({check.get('mode')}): against {len(candidates)} instant(s) completed or planned "
            f"while it ran: {seen}; no overlapping file group")


def index_text(stats: dict) -> str:
    """The index lookup of a write, in the order a user tunes it: files, pruning, bloom, keys."""
    labels = [("index_type", "index"), ("partitions", "partitions looked up"),
              ("files_in_partitions", "files in those partitions"),
              ("files_after_range_pruning", "files after range pruning"),
              ("files_after_bloom", "files after bloom filter check"), ("keys_checked", "keys checked"),
              ("bloom_positives", "bloom positives"), ("false_positives", "false positives"),
              ("keys_matched", "keys matched")]
    rows = [[label, str(stats[k])] for k, label in labels if k in stats]
    rows += [[f"time {k.removesuffix('_s')} (s)", str(v)] for k, v in stats.get("phases", {}).items()]
    return table_text(["Index", "Value"], rows)


def show_file_groups(table: HudiTable, partition: str | None) -> str:
    import pyarrow.parquet as pq

    view = table.file_system_view(partitions=[partition] if partition is not None else None)
    rows = []
    for group in view.file_groups():
        latest = group.latest_slice
        base = latest.base_file if latest else None
        records = ""
        if base is not None:
            with table.storage.fs.open_input_file(table.storage.full(base.path)) as f:
                records = str(pq.read_metadata(f).num_rows)
        logs = latest.log_files if latest else ()
        rows.append([group.partition_path or '""', group.file_id, latest.base_instant if latest else "",
                     base.name if base else "", human(base.size) if base else "", records, len(logs),
                     human(sum(lf.size for lf in logs)) if logs else "", len(group.slices)])
    return table_text(["Partition", "File ID", "Base Instant", "Latest Base File", "Size", "Records",
                       "Log Files", "Log Size", "Slices"], rows) + \
        f"\n{len(rows)} file group(s) in {len(view.partitions)} partition(s)"


def show_compactions(table: HudiTable, instant: str | None) -> str:
    """Compaction plans (pending and completed), or the operations of one plan."""
    from pyhudi.plans.compaction import read_plan
    from pyhudi.timeline.instant import COMPACTION, State

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


def show_properties(table: HudiTable) -> str:
    return table_text(["Property", "Value"], sorted((k, v if len(v) < 100 else v[:97] + "...")
                                                   for k, v in table.properties.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyhudi", description="Inspect Apache Hudi tables.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="show table metadata")
    what = show.add_subparsers(dest="what", required=True)
    for name, helptext in (("commits", "completed writes with their statistics"),
                           ("commit", "per-file write statistics of one instant"),
                           ("file-groups", "file groups and their latest base files"),
                           ("timeline", "every instant file with its action and state"),
                           ("properties", "hoodie.properties"),
                           ("metadata", "the metadata table: partitions, file groups, timeline, agreement")):
        p = what.add_parser(name, help=helptext)
        p.add_argument("--path", required=True, help="table base path")
        if name == "commit":
            p.add_argument("instant")
        if name == "commits":
            p.add_argument("--limit", type=int, default=0, help="newest N commits only")
        if name == "file-groups":
            p.add_argument("--partition", default=None)
    compaction = sub.add_parser("compaction", help="schedule, run and list compactions (merge-on-read)")
    action = compaction.add_subparsers(dest="what", required=True)
    for name, helptext in (("show", "compaction plans, or the file slices of one (--instant)"),
                           ("schedule", "write a compaction plan of every file slice with log files"),
                           ("run", "run a pending plan (--instant), or all of them (needs Spark)")):
        p = action.add_parser(name, help=helptext)
        p.add_argument("--path", required=True, help="table base path")
        if name != "schedule":
            p.add_argument("--instant", default=None)
        _option_arg(p, example="hoodie.compaction.target.io=1024")
    from pyhudi.cli_clustering import add_parser as add_clustering

    add_clustering(sub)
    metadata = sub.add_parser("metadata", help="the metadata table")
    mwhat = metadata.add_subparsers(dest="what", required=True)
    p = mwhat.add_parser("validate", help="compare the files partition with a storage listing; exit 1 on a difference")
    p.add_argument("--path", required=True, help="table base path")
    services(sub)
    p = sub.add_parser("report", help="write one self-contained HTML page of the table: timeline, file layout, "
                       "write amplification, index efficiency, write phases, options, with pictures")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--out", default="report.html", help="HTML file to write (default report.html)")
    p = sub.add_parser("advise", help="tuning advice from the table's own history, with the figures behind it")
    p.add_argument("--path", required=True, help="table base path")
    args = parser.parse_args(argv)
    try:
        table = HudiTable(args.path)
        if args.command == "report":
            from pyhudi.report.page import write_report

            report = write_report(args.path, args.out)
            advice = len(report.advice)
            print(f"wrote {report.path} ({report.charts} charts, {advice} piece{'s' if advice != 1 else ''} of "
                  f"advice) in {report.seconds:.2f} s")
            return 0
        if args.command == "advise":
            from pyhudi.report.advisor import advice_text, advise
            from pyhudi.report.facts import gather

            print(advice_text(advise(gather(table))))
            return 0
        if args.command == "metadata":
            from pyhudi.cli_metadata import validate, validate_text

            result = validate(table)
            print(validate_text(result))
            return 0 if result.agrees else 1
        if args.command == "compaction":
            print(compaction_command(table, args))
        elif args.command == "clustering":
            from pyhudi.cli_clustering import clustering_command

            print(clustering_command(table, args, _options(args)))
        elif args.command in ("clean", "archive", "savepoint", "restore", "rollback"):
            print(service_command(table, args))
        elif args.what == "commits":
            print(show_commits(table, args.limit))
        elif args.what == "commit":
            print(show_commit(table, args.instant))
        elif args.what == "file-groups":
            print(show_file_groups(table, args.partition))
        elif args.what == "metadata":
            from pyhudi.cli_metadata import show_metadata

            print(show_metadata(table))
        elif args.what == "timeline":
            from pyhudi.cli_timeline import show_timeline

            print(show_timeline(table))
        else:
            print(show_properties(table))
    except HudiError as exc:
        print(f"pyhudi: {exc}", file=sys.stderr)
        return 2
    return 0


def _option_arg(p: argparse.ArgumentParser, *, example: str = "hoodie.clean.commits.retained=5") -> None:
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help=f"a hoodie.* option, e.g. {example}")


def services(sub: argparse._SubParsersAction) -> None:
    """Sub-commands of the table services: clean, archive, savepoint, restore, rollback."""
    for name, helptext in (("clean", "delete file slices the cleaning policy no longer retains"),
                           ("archive", "move instants beyond hoodie.keep.max.commits to the archived timeline")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--path", required=True, help="table base path")
        _option_arg(p)
    sp = sub.add_parser("savepoint", help="create, delete and list savepoints")
    act = sp.add_subparsers(dest="what", required=True)
    for name, helptext in (("create", "savepoint a completed commit (default the latest)"),
                           ("delete", "delete the savepoint of --instant"),
                           ("list", "list savepoints")):
        p = act.add_parser(name, help=helptext)
        p.add_argument("--path", required=True, help="table base path")
        if name != "list":
            p.add_argument("--instant", default=None, required=name == "delete")
        if name == "create":
            p.add_argument("--user", default=None)
            p.add_argument("--comments", default="")
        if name != "list":
            _option_arg(p, example=LOCK_EXAMPLE)
    p = sub.add_parser("restore", help="roll the table back to a savepoint")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--instant", required=True, help="the savepoint instant")
    _option_arg(p, example=LOCK_EXAMPLE)
    p = sub.add_parser("rollback", help="roll back the latest completed commit")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--instant", default=None, help="the commit (must be the latest)")
    _option_arg(p, example=LOCK_EXAMPLE)


#: the options the writers' lock and heartbeats need, which services touching the timeline share
LOCK_EXAMPLE = "hoodie.write.lock.provider=...InProcessLockProvider"


def _options(args: argparse.Namespace) -> dict[str, str]:
    from pyhudi.errors import HudiConfigError

    options = {}
    for item in getattr(args, "option", []):
        if "=" not in item:
            raise HudiConfigError(f"--option takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        options[key.strip()] = value.strip()
    return options


def service_command(table: HudiTable, args: argparse.Namespace) -> str:
    from pyhudi.config import HudiConfig
    from pyhudi.plans.savepoint import list_savepoints
    from pyhudi.services import archival, clean, restore, savepoint

    if args.command == "clean":
        done = clean.clean(table, HudiConfig.of(_options(args)), force=True)
        return "\n".join(f"clean {c.instant}: deleted {c.files_deleted} files"
                         + (f", {c.failed} failed" if c.failed else "")
                         + (f" (retains from {c.earliest_to_retain})" if c.earliest_to_retain else "")
                         for c in done) or "nothing to clean"
    if args.command == "archive":
        archived = archival.archive(table, HudiConfig.of(_options(args)))
        return f"archived {len(archived)} instants ({archived[0]} .. {archived[-1]})" if archived \
            else "nothing to archive"
    cfg = HudiConfig.of(_options(args))
    if args.command == "restore":
        res = restore.restore(table, args.instant, cfg=cfg)
        return f"restore {res.instant}: table back at savepoint {res.savepoint}; rolled back " \
               f"{len(res.rolled_back)} instants, deleted {res.files_deleted} files"
    if args.command == "rollback":
        return f"rolled back the latest commit as rollback {restore.rollback_commit(table, args.instant, cfg=cfg)}"
    if args.what == "create":
        made = savepoint.create_savepoint(table, args.instant, user=args.user, comments=args.comments, cfg=cfg)
        return f"savepoint {made.instant}: {sum(len(v) for v in made.files.values())} files kept"
    if args.what == "delete":
        savepoint.delete_savepoint(table, args.instant, cfg=cfg)
        return f"deleted savepoint {args.instant}"
    rows = [[sp.instant, sp.savepointed_by, _epoch(sp.savepointed_at), sum(len(v) for v in sp.files.values()),
             sp.comments] for sp in list_savepoints(table.timeline)]
    return table_text(["Savepoint", "By", "At", "Files", "Comments"], rows)


def _epoch(millis: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S") if millis else "-"


def compaction_command(table: HudiTable, args: argparse.Namespace) -> str:
    from pyhudi.config import HudiConfig

    options = _options(args)
    if args.what == "show":
        return show_compactions(table, args.instant)
    if args.what == "schedule":
        from pyhudi.services.compaction import schedule_compaction

        instant = schedule_compaction(table, HudiConfig.of(options))
        return f"scheduled compaction {instant}" if instant else "nothing to compact: no file slice has log files"
    import pyhudi

    spark = pyhudi.spark_session()
    done = pyhudi.compact(spark, table.path, options, instant=args.instant)
    return "\n".join(f"completed compaction {t}" for t in done) or "nothing to compact"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
