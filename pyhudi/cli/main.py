"""The ``pyhudi`` command line: the argument parser and the dispatch to the command modules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyhudi.cli.clustering import add_parser as add_clustering_parser
from pyhudi.cli.clustering import clustering_command
from pyhudi.cli.commits import show_commit, show_commits, show_file_groups, show_properties
from pyhudi.cli.common import options_of, pairs
from pyhudi.cli.compaction import add_parser as add_compaction_parser
from pyhudi.cli.compaction import compaction_command
from pyhudi.cli.metadata import show_metadata, validate, validate_text
from pyhudi.cli.services import SERVICE_COMMANDS, add_service_parsers, service_command
from pyhudi.cli.sync import add_parser as add_sync_parser
from pyhudi.cli.sync import sync_command
from pyhudi.cli.timeline import show_timeline
from pyhudi.errors import HudiError
from pyhudi.report.advisor import advice_text, advise
from pyhudi.report.facts import gather
from pyhudi.report.page import write_report
from pyhudi.table.table import HudiTable


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``pyhudi`` command; the exit status: 0, 1 when ``metadata validate`` finds a
    difference, 2 on a :class:`~pyhudi.errors.HudiError` (printed, without a traceback)."""
    parser = argparse.ArgumentParser(prog="pyhudi", description="Inspect Apache Hudi tables.")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="store settings for s3a:// and other object-store paths, by Hadoop's names "
                        "(fs.s3a.endpoint=http://host:9000, fs.s3a.path.style.access=true) or hudi-rs's "
                        "(aws_endpoint_url=...); the AWS environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID...) "
                        "applies too. Give it before the command: pyhudi --storage-option K=V show ...")
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
    add_compaction_parser(sub)
    add_clustering_parser(sub)
    metadata = sub.add_parser("metadata", help="the metadata table")
    mwhat = metadata.add_subparsers(dest="what", required=True)
    p = mwhat.add_parser("validate", help="compare the files partition with a storage listing; exit 1 on a difference")
    p.add_argument("--path", required=True, help="table base path")
    add_service_parsers(sub)
    add_sync_parser(sub)
    p = sub.add_parser("report", help="write one self-contained HTML page of the table: timeline, file layout, "
                       "write amplification, index efficiency, write phases, options, with pictures")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--out", default="report.html", help="HTML file to write (default report.html)")
    p = sub.add_parser("advise", help="tuning advice from the table's own history, with the figures behind it")
    p.add_argument("--path", required=True, help="table base path")
    args = parser.parse_args(argv)
    try:
        table = HudiTable(args.path, storage_options={**pairs(args.storage_option, "--storage-option"),
                                                      **options_of(args)})
        if args.command == "report":
            report = write_report(table, args.out)
            advice = len(report.advice)
            print(f"wrote {report.path} ({report.charts} charts, {advice} piece{'s' if advice != 1 else ''} of "
                  f"advice) in {report.seconds:.2f} s")
            return 0
        if args.command == "advise":
            print(advice_text(advise(gather(table))))
            return 0
        if args.command == "metadata":
            result = validate(table)
            print(validate_text(result))
            return 0 if result.agrees else 1
        if args.command == "compaction":
            print(compaction_command(table, args))
        elif args.command == "clustering":
            print(clustering_command(table, args))
        elif args.command == "sync":
            print(sync_command(table, args))
        elif args.command in SERVICE_COMMANDS:
            print(service_command(table, args))
        elif args.what == "commits":
            print(show_commits(table, args.limit))
        elif args.what == "commit":
            print(show_commit(table, args.instant))
        elif args.what == "file-groups":
            print(show_file_groups(table, args.partition))
        elif args.what == "metadata":
            print(show_metadata(table))
        elif args.what == "timeline":
            print(show_timeline(table))
        else:
            print(show_properties(table))
    except HudiError as exc:
        print(f"pyhudi: {exc}", file=sys.stderr)
        return 2
    return 0
