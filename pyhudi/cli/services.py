"""``pyhudi clean|archive|savepoint|restore|rollback|upgrade|downgrade``: the table services that work
on the timeline and files alone (no Spark), as ``hudi-cli``'s commands of the same names."""

from __future__ import annotations

import argparse

from pyhudi.cli.common import LOCK_EXAMPLE, epoch_text, option_arg, options_of, table_text
from pyhudi.config import HudiConfig
from pyhudi.plans.savepoint import list_savepoints
from pyhudi.services import archival, clean, restore, savepoint, table_version
from pyhudi.table.table import HudiTable

#: the sub-commands this module serves
SERVICE_COMMANDS = ("clean", "archive", "savepoint", "restore", "rollback", "upgrade", "downgrade")


def add_service_parsers(sub: argparse._SubParsersAction) -> None:
    """Sub-commands of the table services: clean, archive, savepoint, restore, rollback."""
    for name, helptext in (("clean", "delete file slices the cleaning policy no longer retains"),
                           ("archive", "move instants beyond hoodie.keep.max.commits to the archived timeline")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--path", required=True, help="table base path")
        option_arg(p)
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
            option_arg(p, example=LOCK_EXAMPLE)
    p = sub.add_parser("restore", help="roll the table back to a savepoint")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--instant", required=True, help="the savepoint instant")
    option_arg(p, example=LOCK_EXAMPLE)
    p = sub.add_parser("rollback", help="roll back the latest completed commit")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--instant", default=None, help="the commit (must be the latest)")
    option_arg(p, example=LOCK_EXAMPLE)
    for name, default, helptext in (("upgrade", 9, "move the table to a newer table version (8 or 9)"),
                                    ("downgrade", 6, "move the table to an older table version (8 or 6)")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--path", required=True, help="table base path")
        p.add_argument("--to", type=int, default=default, choices=table_version.VERSIONS, help="the table version")
        option_arg(p, example=LOCK_EXAMPLE)


def service_command(table: HudiTable, args: argparse.Namespace) -> str:
    if args.command == "clean":
        done = clean.clean(table, HudiConfig.of(options_of(args)), force=True)
        return "\n".join(f"clean {c.instant}: deleted {c.files_deleted} files"
                         + (f", {c.failed} failed" if c.failed else "")
                         + (f" (retains from {c.earliest_to_retain})" if c.earliest_to_retain else "")
                         for c in done) or "nothing to clean"
    if args.command == "archive":
        archived = archival.archive(table, HudiConfig.of(options_of(args)))
        return f"archived {len(archived)} instants ({archived[0]} .. {archived[-1]})" if archived \
            else "nothing to archive"
    cfg = HudiConfig.of(options_of(args))
    if args.command == "restore":
        res = restore.restore(table, args.instant, cfg=cfg)
        return f"restore {res.instant}: table back at savepoint {res.savepoint}; rolled back " \
               f"{len(res.rolled_back)} instants, deleted {res.files_deleted} files"
    if args.command in ("upgrade", "downgrade"):
        moved = table_version.change_version(table, args.to, cfg, direction=args.command)
        if moved.from_version == moved.to_version:
            return f"the table is at version {moved.to_version} already"
        return (f"table version {moved.from_version} -> {moved.to_version}: {moved.instants_converted} timeline "
                "files rewritten" + ("; the metadata table was dropped (the next writer keeping one rebuilds it)"
                                     if moved.metadata_table_dropped else ""))
    if args.command == "rollback":
        return f"rolled back the latest commit as rollback {restore.rollback_commit(table, args.instant, cfg=cfg)}"
    if args.what == "create":
        made = savepoint.create_savepoint(table, args.instant, user=args.user, comments=args.comments, cfg=cfg)
        return f"savepoint {made.instant}: {sum(len(v) for v in made.files.values())} files kept"
    if args.what == "delete":
        savepoint.delete_savepoint(table, args.instant, cfg=cfg)
        return f"deleted savepoint {args.instant}"
    rows = [[sp.instant, sp.savepointed_by, epoch_text(sp.savepointed_at), sum(len(v) for v in sp.files.values()),
             sp.comments] for sp in list_savepoints(table.timeline)]
    return table_text(["Savepoint", "By", "At", "Files", "Comments"], rows)
