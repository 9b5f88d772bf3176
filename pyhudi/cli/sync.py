"""``pyhudi sync``: register a table in the Hive metastore or AWS Glue now, as a write with
``hoodie.datasource.meta.sync.enable`` does after its commit (Hudi's ``run_sync_tool.sh``)."""

from __future__ import annotations

import argparse

from pyhudi import config as C
from pyhudi.cli.common import option_arg, options_of, table_text
from pyhudi.config import HudiConfig
from pyhudi.sync.catalog import HudiCatalogError
from pyhudi.sync.tool import sync_catalogs
from pyhudi.table.table import HudiTable

_TOOLS = {"hms": C.HIVE_SYNC_TOOL, "glue": C.GLUE_SYNC_TOOL}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sync", help="register the table and its partitions in a catalog (Hive metastore, AWS Glue)")
    p.add_argument("--path", required=True, help="table base path")
    p.add_argument("--catalog", action="append", choices=sorted(_TOOLS), default=[],
                   help="catalog to sync (repeatable); default: hoodie.meta.sync.client.tool.class, else hms")
    p.add_argument("--database", help="catalog database (hoodie.datasource.hive_sync.database)")
    p.add_argument("--table", help="catalog table name (hoodie.datasource.hive_sync.table)")
    p.add_argument("--metastore-uris", help="thrift://host:9083 (hoodie.datasource.hive_sync.metastore.uris)")
    p.add_argument("--glue-endpoint", help="Glue endpoint URL (hoodie.aws.glue.endpoint)")
    p.add_argument("--glue-region", help="Glue region (hoodie.aws.glue.region)")
    p.add_argument("--full", action="store_true", help="compare every partition, not only the instants since the "
                   "last sync (hoodie.meta.sync.incremental=false)")
    option_arg(p, example="hoodie.datasource.hive_sync.support_timestamp=true")


def sync_options(args: argparse.Namespace) -> dict[str, str]:
    """The command's flags as the ``hoodie.*`` options they stand for, over ``--option``."""
    options = options_of(args)
    for flag, opt in (("database", C.SYNC_DATABASE), ("table", C.SYNC_TABLE), ("metastore_uris", C.METASTORE_URIS),
                      ("glue_endpoint", C.GLUE_ENDPOINT), ("glue_region", C.GLUE_REGION)):
        if getattr(args, flag):
            options[opt.key] = getattr(args, flag)
    if args.catalog:
        options[C.SYNC_TOOLS.key] = ",".join(_TOOLS[c] for c in args.catalog)
    if args.full:
        options[C.INCREMENTAL_SYNC.key] = "false"
    return options


def sync_command(table: HudiTable, args: argparse.Namespace) -> str:
    """Sync, and one line per catalog: what changed, the calls it took; a failure raises after all
    catalogs ran (exit status 2)."""
    reports = sync_catalogs(table, HudiConfig.of(sync_options(args)))
    rows = [[r.catalog, ", ".join(r.tables), ", ".join(r.created) or "-", r.added, r.updated, r.dropped,
             "yes" if r.schema_changed else "no", r.last_synced or "-", sum(r.calls.values()), f"{r.seconds:.2f}",
             r.error or "ok"] for r in reports]
    text = table_text(["Catalog", "Tables", "Created", "Added", "Updated", "Dropped", "Schema changed",
                       "Synced to", "Calls", "Seconds", "Result"], rows)
    failed = [r for r in reports if r.error]
    if failed:
        raise HudiCatalogError(text + "\n" + "; ".join(f"{r.catalog}: {r.error}" for r in failed))
    return text


__all__ = ["add_parser", "sync_command"]
