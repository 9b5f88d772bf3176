"""One sync of a Hudi table to a catalog: Hudi's ``HiveSyncTool`` / ``AwsGlueCatalogSyncTool``,
with the calls held to what changed.

For each catalog table of the Hudi table (:func:`~pyhudi.sync.entries.sync_targets`):

1. ``get_table``. Absent: create it (and its database), register every live partition, done.
   Registered at another location: drop and register afresh (Hudi does the same).
2. Partition changes since its ``last_commit_time_sync``
   (:func:`~pyhudi.sync.partitions.partition_changes`). The partitions the instants since then
   touched are looked up in the catalog (one batched read) and added, re-pointed or dropped in one
   batched call per kind. A full comparison (never synced, the synced instant archived or gone, a
   restore or a rollback of a synced commit, ``hoodie.meta.sync.incremental=false``) lists the
   catalog's partitions instead.
3. One table update carrying the schema, the properties and the new ``last_commit_time_sync``, after
   the partitions: a sync that fails midway leaves the old sync point, so the next one redoes the
   range; every step is idempotent. With ``condition.sync`` the update is skipped when it would
   only move the sync point.

A failure is returned in the report, never raised by :func:`sync_catalogs`: the data commit it
follows is durable, and the next sync catches the catalog up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiError, HudiUnsupportedOptionError
from pyhudi.sync.catalog import CatalogClient, Column, PartitionEntry, TableEntry
from pyhudi.sync.entries import (
    LAST_SYNC,
    LAST_SYNC_COMPLETION,
    SyncSettings,
    SyncTarget,
    catalog_types,
    check_schema_change,
    partition_entry,
    table_entry,
    table_location,
)
from pyhudi.sync.partitions import PartitionChanges, partition_changes
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import RESTORE, ROLLBACK

__all__ = ["SyncReport", "catalog_clients", "check_sync_options", "sync_catalogs", "sync_enabled", "sync_table"]

log = logging.getLogger("pyhudi")
#: partition changes by (sync point, its completion time, full), for one snapshot of one table
_Memo = dict[tuple[str | None, str | None, bool], PartitionChanges]
_DATABASE_DESCRIPTION = "automatically created by pyhudi"


@dataclass
class SyncReport:
    """What one sync did in one catalog: tables created, partitions added/updated/dropped, whether
    the schema changed, the instant now recorded as synced, the catalog calls by API, the time, and
    the error that stopped it (None when it completed)."""

    catalog: str
    tables: tuple[str, ...] = ()
    created: list[str] = field(default_factory=list)
    added: int = 0
    updated: int = 0
    dropped: int = 0
    schema_changed: bool = False
    last_synced: str | None = None
    calls: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], (), {}, 0, False) or k == "catalog"}


def sync_enabled(cfg: HudiConfig) -> bool:
    """Whether a write syncs: ``hoodie.datasource.meta.sync.enable`` or Hudi's legacy
    ``hoodie.datasource.hive_sync.enable``."""
    return bool(cfg.get(C.META_SYNC_ENABLE) or cfg.get(C.HIVE_SYNC_ENABLE))


def check_sync_options(cfg: HudiConfig) -> None:
    """Refuse, before a write starts, sync settings that ask for what pyhudi does not do: Hudi's
    HiveSyncTool without a mode runs JDBC against HiveServer2 when it is given a JDBC URL, where
    pyhudi would quietly talk to the metastore instead."""
    if cfg.is_set(C.JDBC_URL) and cfg.get(C.SYNC_MODE) != "hms" and C.HIVE_SYNC_TOOL in catalog_tools(cfg):
        raise HudiUnsupportedOptionError(
            f"{C.JDBC_URL.key} is set without {C.SYNC_MODE.key}=hms: Apache Hudi would sync through HiveServer2's "
            "JDBC endpoint, which pyhudi does not implement; set hoodie.datasource.hive_sync.mode=hms and "
            "hoodie.datasource.hive_sync.metastore.uris to sync through the metastore")


def catalog_tools(cfg: HudiConfig) -> list[str]:
    """The sync tool classes ``hoodie.meta.sync.client.tool.class`` names (mode ``glue`` adds Glue,
    as Hudi's Spark writer does)."""
    tools = list(cfg.get(C.SYNC_TOOLS))
    if cfg.get(C.SYNC_MODE) == "glue" and C.GLUE_SYNC_TOOL not in tools:
        tools.append(C.GLUE_SYNC_TOOL)
    return tools


def catalog_client(tool: str, cfg: HudiConfig) -> CatalogClient:
    """The client of one sync tool's catalog, from the options."""
    if tool == C.HIVE_SYNC_TOOL:
        from pyhudi.sync.hms import HiveMetastoreClient
        return HiveMetastoreClient(cfg.get(C.METASTORE_URIS), batch_size=cfg.get(C.BATCH_NUM))
    from pyhudi.sync.glue import GlueClient
    return GlueClient(region=cfg.get(C.GLUE_REGION), endpoint=cfg.get(C.GLUE_ENDPOINT),
                      catalog_id=cfg.get(C.GLUE_CATALOG_ID), skip_archive=cfg.get(C.GLUE_SKIP_ARCHIVE),
                      access_key=cfg.get(C.AWS_ACCESS_KEY), secret_key=cfg.get(C.AWS_SECRET_KEY),
                      session_token=cfg.get(C.AWS_SESSION_TOKEN))


def catalog_clients(cfg: HudiConfig) -> list[CatalogClient]:
    """The clients of every configured catalog (raises if one cannot be built)."""
    return [catalog_client(tool, cfg) for tool in catalog_tools(cfg)]


def sync_catalogs(table: HudiTable, cfg: HudiConfig, *, clients: Sequence[CatalogClient] | None = None,
                  spark_version: str | None = None) -> list[SyncReport]:
    """Sync ``table`` to every configured catalog; one report per catalog, failures included: a
    catalog that cannot be reached or whose client cannot be built fails alone."""
    check_sync_options(cfg)
    settings = SyncSettings.of(table, cfg, spark_version=spark_version)
    reports = []
    memo: _Memo = {}  # the partition changes of one sync point, shared by every catalog table
    if clients is not None:
        reports = [sync_table(table, client, settings, memo=memo) for client in clients]
    else:
        for tool in catalog_tools(cfg):
            kind = "hms" if tool == C.HIVE_SYNC_TOOL else "glue"
            try:
                client = catalog_client(tool, cfg)
            except Exception as exc:  # bad settings of this catalog: the others still sync
                reports.append(SyncReport(kind, error=f"{type(exc).__name__}: {exc}"))
                continue
            try:
                reports.append(sync_table(table, client, settings, memo=memo))
            finally:
                close = getattr(client, "close", None)
                if close is not None:
                    close()
    logger = log.info if cfg.get(C.IGNORE_EXCEPTIONS) else log.warning
    for report in reports:
        if report.error:
            logger("the %s sync of %s failed (the data commit stands; the next sync catches up): %s",
                   report.catalog, table.path, report.error)
    return reports


def sync_table(table: HudiTable, client: CatalogClient, settings: SyncSettings, *,
               memo: _Memo | None = None) -> SyncReport:
    """Sync every catalog table of ``table`` to one catalog; errors end up in the report. ``memo``
    keeps the partition changes computed for a sync point, so the tables of a merge-on-read table
    (and other catalogs, synced to the same point) list the table once."""
    memo = {} if memo is None else memo
    report = SyncReport(client.kind, tables=tuple(f"{settings.database}.{t.name}" for t in settings.targets))
    before = dict(client.calls)
    started = time.monotonic()
    try:
        for target in settings.targets:
            try:
                _sync_one(table, client, settings, target, report, memo)
            except HudiError:
                if not settings.recreate_on_error or client.get_table(settings.database, target.name) is None:
                    raise
                log.warning("re-registering %s.%s after a failed sync", settings.database, target.name)
                client.drop_table(settings.database, target.name)
                _sync_one(table, client, settings, target, report, memo)
    except HudiError as exc:
        report.error = str(exc)
    except Exception as exc:  # anything a client or the timeline did not wrap: this catalog fails alone
        report.error = f"{type(exc).__name__}: {exc}"
    report.calls = {k: v - before.get(k, 0) for k, v in client.calls.items() if v - before.get(k, 0)}
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _sync_one(table: HudiTable, client: CatalogClient, settings: SyncSettings, target: SyncTarget,
              report: SyncReport, memo: _Memo) -> None:
    remote = client.get_table(settings.database, target.name)
    if remote is not None and _bare(remote.storage.location) != _bare(table_location(table)):
        log.warning("%s.%s is registered at %s, not at %s: registering it afresh", settings.database,
                    target.name, remote.storage.location, table.path)
        client.drop_table(settings.database, target.name)
        remote = None
    if remote is None:
        _create(table, client, settings, target, report, memo)
        return
    last = remote.parameters.get(LAST_SYNC) or None
    if not table.timeline.completed_writes():
        # every write rolled back (or restored away): no partition is live; the entry stays, as a
        # table without a completed write has no schema to register
        if settings.partition_fields and not settings.no_partition_metadata:
            _apply(client, remote, [], {}, sorted(client.get_partitions(remote)), report)
        return
    if _behind(table, last):
        log.info("%s.%s was synced to %s, after this snapshot of %s: left as it is", settings.database,
                 target.name, last, table.path)
        report.last_synced = last
        return
    last_completion = remote.parameters.get(LAST_SYNC_COMPLETION) or None
    changes = _changes(table, memo, last, last_completion, full=not settings.incremental)
    synced, synced_completion = changes.last_synced, changes.last_synced_completion
    if not changes.full and last and synced and last > synced:
        # a sync that saw a newer snapshot ran in between: never move the sync point back
        synced, synced_completion = last, last_completion
    desired = table_entry(table, settings, target, kind=client.kind, last_synced=synced,
                          last_synced_completion=synced_completion)
    columns_changed = check_schema_change(remote, desired)
    partitions_changed = False
    if settings.partition_fields and not settings.no_partition_metadata:
        if changes.full:
            current = client.get_partitions(remote)
            wanted = [partition_entry(table, settings, p) for p in changes.added]  # every live partition
            gone = set(current) - {p.values for p in wanted}
        else:
            # every live partition the range touched is looked up, not only those that appeared:
            # a sync that failed after its drops leaves the catalog ahead of its sync point
            wanted = [partition_entry(table, settings, p) for p in sorted({*changes.added, *changes.updated})]
            dropped = [settings.values(p) for p in changes.dropped]
            current = client.get_partitions(remote, [p.values for p in wanted] + dropped) if wanted or dropped \
                else {}
            gone = {v for v in dropped if v in current}
        partitions_changed = _apply(client, desired, wanted, current, gone, report)
    merged = _merged(remote, desired)
    changed = columns_changed or partitions_changed or _differs(remote, merged, ignore=(LAST_SYNC,
                                                                                         LAST_SYNC_COMPLETION))
    if changed or (not settings.conditional and _differs(remote, merged, ignore=())):
        client.update_table(merged, cascade=columns_changed and bool(desired.partition_keys))
        report.schema_changed |= columns_changed
        if client.kind == "glue" and desired.partition_keys and _types_changed(remote, desired):
            # Glue partitions keep their own columns and Glue has no cascade: re-point every
            # partition at the new descriptor, as Hudi does after a type change
            current = client.get_partitions(merged)
            client.update_partitions(merged, [PartitionEntry(v, at) for v, at in sorted(current.items())])
    report.last_synced = synced


def _changes(table: HudiTable, memo: _Memo, last: str | None, completion: str | None, *,
             full: bool) -> PartitionChanges:
    """:func:`partition_changes` since a sync point, computed once per sync point and table."""
    key = (last, completion, full)
    if key not in memo:
        memo[key] = partition_changes(table, last_synced=last, last_synced_completion=completion, full=full)
    return memo[key]


def _behind(table: HudiTable, last: str | None) -> bool:
    """Whether the catalog was synced from a newer snapshot than ``table`` (another writer's sync
    ran in between): its sync point is newer than every write this snapshot saw, and nothing here
    (a rollback or restore after it) says the table went back. Such a sync leaves the catalog be."""
    writes = table.timeline.completed_writes()
    if not last or not writes or last <= writes[-1].timestamp:
        return False
    return not any(i.action in (ROLLBACK, RESTORE) and i.timestamp > last for i in table.timeline.completed())


def _create(table: HudiTable, client: CatalogClient, settings: SyncSettings, target: SyncTarget,
            report: SyncReport, memo: _Memo) -> None:
    """Register a table not in the catalog, with every live partition."""
    if settings.auto_create_database and not client.database_exists(settings.database):
        client.create_database(settings.database, description=_DATABASE_DESCRIPTION)
    changes = _changes(table, memo, None, None, full=True)
    entry = table_entry(table, settings, target, kind=client.kind, last_synced=changes.last_synced,
                        last_synced_completion=changes.last_synced_completion)
    partitions = [partition_entry(table, settings, p) for p in changes.added] \
        if settings.partition_fields and not settings.no_partition_metadata else []  # fails before creating
    # the partitions first, as a table whose sync point is set must have them: register the table
    # without one, add the partitions, then record the sync point
    bare = replace(entry, parameters={k: v for k, v in entry.parameters.items()
                                      if k not in (LAST_SYNC, LAST_SYNC_COMPLETION)})
    client.create_table(bare)
    report.created.append(f"{settings.database}.{target.name}")
    if partitions:
        client.add_partitions(entry, partitions)
        report.added += len(partitions)
    if entry.parameters != bare.parameters:
        client.update_table(entry, cascade=False)
    report.last_synced = changes.last_synced


def _apply(client: CatalogClient, table: TableEntry, wanted: Iterable[PartitionEntry],
           current: Mapping[tuple[str, ...], str], gone: Iterable[tuple[str, ...]], report: SyncReport) -> bool:
    """Add the wanted partitions the catalog lacks, re-point those at another location, drop the
    gone ones: one batched call per kind, none when a kind is empty. Whether anything changed."""
    add: list[PartitionEntry] = []
    update: list[PartitionEntry] = []
    for part in wanted:
        at = current.get(part.values)
        if at is None:
            add.append(part)
        elif _bare(at) != _bare(part.location):
            update.append(part)
    drop = sorted(gone)
    if add:
        client.add_partitions(table, add)
        report.added += len(add)
    if update:
        client.update_partitions(table, update)
        report.updated += len(update)
    if drop:
        client.drop_partitions(table, drop)
        report.dropped += len(drop)
    return bool(add or update or drop)


def _types_changed(remote: TableEntry, desired: TableEntry) -> bool:
    """Whether a column kept its name but changed its type (added columns are not a type change)."""
    old = catalog_types(remote.storage.columns)
    return any(old.get(c.name.lower(), c.type) != c.type for c in desired.storage.columns)


def _merged(remote: TableEntry, desired: TableEntry) -> TableEntry:
    """``desired`` keeping what others put in the catalog: parameters and serde parameters pyhudi
    does not set stay (the metastore's ``transient_lastDdlTime``, a user's comment, Glue's own)."""
    params = {**remote.parameters, **desired.parameters}
    serde = {**remote.storage.serde_parameters, **desired.storage.serde_parameters}

    def commented(columns: tuple[Column, ...], before: tuple[Column, ...]) -> tuple[Column, ...]:
        """Columns keeping the comments users gave them in the catalog (pyhudi registers none)."""
        notes = {c.name.lower(): c.comment for c in before if c.comment}
        return tuple(replace(c, comment=c.comment or notes.get(c.name.lower(), "")) for c in columns)
    storage = replace(desired.storage, serde_parameters=serde,
                      columns=commented(desired.storage.columns, remote.storage.columns))
    return replace(desired, parameters=params, storage=storage, owner=remote.owner or desired.owner,
                   partition_keys=commented(desired.partition_keys, remote.partition_keys))


def _differs(remote: TableEntry, merged: TableEntry, *, ignore: tuple[str, ...]) -> bool:
    """Whether writing ``merged`` would change the catalog, leaving the ``ignore`` parameters aside."""
    def params(entry: TableEntry) -> dict[str, str]:
        return {k: v for k, v in entry.parameters.items() if k not in ignore}
    a, b = remote.storage, merged.storage
    return (params(remote) != params(merged) or dict(a.serde_parameters) != dict(b.serde_parameters)
            or (a.input_format, a.output_format, a.serde) != (b.input_format, b.output_format, b.serde)
            or _bare(a.location) != _bare(b.location) or remote.table_type != merged.table_type)


def _bare(location: str) -> str:
    """A location without its scheme, as Hudi compares them: ``s3a://b/t`` = ``s3://b/t`` (Glue
    holds the latter), ``file:/t`` = ``file:///t`` = ``/t``."""
    parts = urlsplit(location)
    if not parts.scheme:
        return location.rstrip("/") or "/"
    return parts.netloc + (parts.path.rstrip("/") or "/")
