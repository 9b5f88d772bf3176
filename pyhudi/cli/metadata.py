"""``pyhudi show metadata`` and ``pyhudi metadata validate``: the metadata table against storage.

The ``files`` partition of a table's metadata table must list exactly the data files a storage
listing finds (files of writes still in progress aside). ``validate`` compares the two and
reports every file missing on either side or recorded with another size.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from pyhudi.cli.common import table_text
from pyhudi.commit.partition_stats_build import latest_files
from pyhudi.commit.record_index_build import live_locations
from pyhudi.config.support import METADATA_PARTITIONS_INFLIGHT
from pyhudi.errors import HudiTableNotFoundError
from pyhudi.io.base_file import BLOOM_FILTER_KEY
from pyhudi.io.file_names import parse_base_file, parse_log_file
from pyhudi.metadata import bloom_filters, column_stats, partition_stats
from pyhudi.metadata import record_index as R
from pyhudi.metadata.files import METADATA_FOLDER, FileListing
from pyhudi.metadata.keys import bloom_filter_key, file_group_id, file_group_index
from pyhudi.metadata.table import MetadataTable
from pyhudi.read.skipping import footers
from pyhudi.storage.fs import FileInfo
from pyhudi.table.table import HudiTable
from pyhudi.write.markers import list_markers

PARTITION_METADATA = ".hoodie_partition_metadata"


@dataclass
class Validation:
    """The metadata table's file listing compared with storage."""

    listing: FileListing
    storage: dict[str, dict[str, int]]
    only_in_metadata: list[str] = field(default_factory=list)
    only_in_storage: list[str] = field(default_factory=list)
    size_differs: list[tuple[str, int, int]] = field(default_factory=list)
    stats_differ: list[str] = field(default_factory=list)  # column_stats against the files' footers

    @property
    def agrees(self) -> bool:
        return not (self.only_in_metadata or self.only_in_storage or self.size_differs or self.stats_differ)


def metadata_table(table: HudiTable) -> HudiTable:
    try:
        return HudiTable(table.storage.child(METADATA_FOLDER))
    except HudiTableNotFoundError:
        raise HudiTableNotFoundError(f"{table.path} has no metadata table ({METADATA_FOLDER})") from None


def _in_progress(table: HudiTable, walked: list[tuple[str, FileInfo]]) -> set[str]:
    """Data files of writes that have not completed (the metadata table does not list them yet)."""
    pending = {i.timestamp for i in table.timeline.pending()}
    files = {rel for instant in pending for rel, _io in list_markers(table.storage, instant)}
    for rel, info in walked:
        base = parse_base_file(info.name)
        log = parse_log_file(info.name)
        if (base is not None and base.instant_time in pending) or (log is not None and log.base_instant in pending):
            files.add(rel)
    return files


def validate(table: HudiTable) -> Validation:
    metadata_table(table)  # an error naming the problem when there is none
    listing = MetadataTable(table.storage).listing(table.timeline)
    walked = table.storage.walk_files("")
    skip = _in_progress(table, walked)
    storage: dict[str, dict[str, int]] = {}
    for rel, info in walked:
        if rel.startswith(".hoodie/") or info.name == PARTITION_METADATA or rel in skip:
            continue
        partition = posixpath.dirname(rel)
        storage.setdefault(partition, {})[info.name] = info.size
    result = Validation(listing, storage)
    for partition in sorted(set(storage) | set(listing.files)):
        mine, theirs = listing.partition_files(partition), storage.get(partition, {})
        for name in sorted(set(mine) - set(theirs)):
            if posixpath.join(partition, name) not in skip:
                result.only_in_metadata.append(posixpath.join(partition, name))
        result.only_in_storage += [posixpath.join(partition, n) for n in sorted(set(theirs) - set(mine))]
        result.size_differs += [(posixpath.join(partition, n), mine[n], theirs[n])
                                for n in sorted(set(mine) & set(theirs)) if mine[n] != theirs[n]]
    result.stats_differ = (_check_column_stats(table, listing, storage) + _check_bloom_filters(table, listing, storage)
                           + _check_partition_stats(table) + _check_record_index(table))
    return result


def _check_record_index(table: HudiTable) -> list[str]:
    """Differences between the record_index partition and the live keys of the table's latest
    file slices: a key missing, recorded in another file group or partition, or recorded though
    no slice holds it (at most 20 of each are named). A key several partitions hold (a table
    without a global index) may be recorded in any of them."""
    mdt = MetadataTable(table.storage)
    if R.PARTITION not in mdt.partitions():
        return []
    recorded: dict[str, tuple[str, str]] = {}
    out = []
    groups = len(mdt.partitions()[R.PARTITION])
    for piece in mdt.slices(R.PARTITION, table.timeline):
        for text, where in R.merged_locations(table.storage, piece).items():
            recorded[text] = where
            if file_group_id(R.FILE_GROUP_PREFIX, file_group_index(text, groups)) != piece.file_id:
                out.append(f"record index: key {text} is in file group {piece.file_id}, not the one it hashes to")
    located = live_locations(table)
    live: dict[str, set[tuple[str, str]]] = {}
    for key, partition, file_id in zip(located.column(R.KEY).to_pylist(),
                                       located.column(R.LOCATION_PARTITION).to_pylist(),
                                       located.column(R.LOCATION_FILE).to_pylist()):
        live.setdefault(key, set()).add((partition, file_id))
    problems = {"missing": [k for k in live if k not in recorded],
                "elsewhere": [k for k in live if k in recorded and recorded[k] not in live[k]],
                "stale": [k for k in recorded if k not in live]}
    described = {"missing": "keys the record index does not hold", "elsewhere": "keys it locates elsewhere",
                 "stale": "keys it holds that no file slice has"}
    for kind, found in problems.items():
        if found:
            out.append(f"record index: {len(found)} {described[kind]}, e.g. "
                       + ", ".join(f"{k} ({recorded.get(k)} vs {sorted(live.get(k, ()))})" for k in sorted(found)[:20]))
    return out


def _check_bloom_filters(table: HudiTable, listing: FileListing, stored: dict[str, dict[str, int]]) -> list[str]:
    """Differences between the bloom_filters partition and the footers of the listed base files."""
    mdt = MetadataTable(table.storage)
    if bloom_filters.PARTITION not in mdt.partitions():
        return []
    recorded = bloom_filters.latest(mdt.read(bloom_filters.PARTITION, table.timeline))
    bases = {bloom_filter_key(p, name): posixpath.join(p, name) if p else name for p, files in listing.files.items()
             for name in files if name.endswith(".parquet") and name in stored.get(p, {})}
    metas = footers(table.storage, sorted(bases.values()))
    out = [f"a bloom filter of a file the metadata table does not list (key {key})"
           for key in sorted(set(recorded) - set(bases))]
    for key, rel in sorted(bases.items()):
        footer = (metas[rel].metadata or {}).get(BLOOM_FILTER_KEY.encode())
        record = recorded.get(key)
        if record is None and footer:
            out.append(f"no bloom filter for {rel}")
        elif record is not None and bytes(record["BloomFilterMetadata"]["bloomFilter"]) != footer:
            out.append(f"the bloom filter of {rel} differs from its footer's")
    return out


def _check_column_stats(table: HudiTable, listing: FileListing, stored: dict[str, dict[str, int]]) -> list[str]:
    """Differences between the column_stats partition and the footers of the listed base files:
    a statistic that disagrees, a base file without statistics, statistics of an unlisted file."""
    mdt = MetadataTable(table.storage)
    if column_stats.PARTITION not in mdt.partitions() and not table.storage.is_dir(
            f"{METADATA_FOLDER}/{column_stats.PARTITION}"):
        return []
    schema = table.arrow_schema()
    if schema is None:
        return []
    records = mdt.read(column_stats.PARTITION, table.timeline)
    recorded = column_stats.file_ranges(records, schema)
    bases = {name: posixpath.join(p, name) if p else name for p, files in listing.files.items()
             for name in files if name.endswith(".parquet") and name in stored.get(p, {})}
    metas = footers(table.storage, sorted(bases.values()))
    out = [f"column stats of a file the metadata table does not list: {name}"
           for name in sorted(set(recorded) - set(bases)) if name.endswith(".parquet")]
    for name, rel in sorted(bases.items()):
        theirs = recorded.get(name)
        if theirs is None:
            out.append(f"no column stats for {rel}")
            continue
        mine = column_stats.file_ranges(column_stats.footer_records("", name, metas[rel]), schema).get(name, {})
        for column, stats in sorted(theirs.items()):
            footer = mine.get(column)
            if footer is None or (stats.min, stats.max, stats.null_count, stats.count) != \
                    (footer.min, footer.max, footer.null_count, footer.count):
                out.append(f"column stats of {rel} column {column}: metadata {stats}, footer {footer}")
    return out


def _check_partition_stats(table: HudiTable) -> list[str]:
    """partition_stats records that do not cover what the column statistics of the partition's
    latest files say (a range narrower, fewer values): data skipping would drop rows. A wider
    range is sound (Hudi 1.1 keeps file groups a replace commit retired in it until the next
    commit to the partition); a partition without a record for a column is never pruned by it."""
    mdt = MetadataTable(table.storage)
    if partition_stats.PARTITION not in mdt.partitions():
        return []
    schema = table.arrow_schema()
    if schema is None:
        return []
    recorded = column_stats.file_ranges(mdt.read(partition_stats.PARTITION, table.timeline), schema)
    columns = sorted({c for ranges in recorded.values() for c in ranges})
    out = []
    for partition, names in sorted(latest_files(table.storage, table.timeline).items()):
        if not partition or not names:
            continue
        files = partition_stats.by_file(column_stats.merged(mdt.read(
            column_stats.PARTITION, table.timeline, key_prefixes=partition_stats.key_prefixes(columns, partition))))
        mine = column_stats.file_ranges(
            partition_stats.aggregate(partition, names, files, columns, mdt.table_version), schema).get(partition, {})
        theirs = recorded.get(partition, {})
        for column, want in sorted(mine.items()):
            have = theirs.get(column)
            if have is None:
                continue
            low = want.min is None or (have.min is not None and have.min <= want.min)
            high = want.max is None or (have.max is not None and have.max >= want.max)
            if not (low and high and have.count >= want.count):
                out.append(f"partition stats of {partition} column {column}: metadata {have}, files {want}")
    return out


def validate_text(result: Validation) -> str:
    files = sum(len(f) for f in result.storage.values())
    if result.agrees:
        return f"metadata table agrees with storage: {len(result.storage)} partitions, {files} files"
    lines = [f"metadata table differs from storage ({files} files in storage):"]
    lines += [f"  only in the metadata table: {p}" for p in result.only_in_metadata]
    lines += [f"  only in storage:            {p}" for p in result.only_in_storage]
    lines += [f"  size differs:               {p} (metadata {a}, storage {b})" for p, a, b in result.size_differs]
    lines += [f"  {d}" for d in result.stats_differ]
    return "\n".join(lines)


def show_metadata(table: HudiTable) -> str:
    mdt = metadata_table(table)
    usable = table.properties.get("hoodie.table.metadata.partitions", "")
    inflight = table.properties.get(METADATA_PARTITIONS_INFLIGHT, "")
    rows = []
    for partition in sorted(mdt.storage.list_dirs("")):
        if partition.startswith("."):
            continue
        names = [i.name for i in mdt.storage.list_files(partition)]
        groups = {parsed.file_id for n in names
                  if (parsed := parse_base_file(n) or parse_log_file(n)) is not None}
        state = "usable" if partition in usable.split(",") else "building" if partition in inflight.split(",") else "-"
        rows.append([partition, state, len(groups), sum(1 for n in names if n.endswith(".hfile")),
                     sum(1 for n in names if parse_log_file(n) is not None)])
    instants = mdt.timeline.instants()
    done = [i for i in instants if i.is_completed]
    head = (f"metadata table {mdt.path}: {len(done)} completed instants "
            f"({sum(1 for i in done if i.action == 'deltacommit')} delta commits, "
            f"{sum(1 for i in done if i.action == 'commit')} compactions), "
            f"{len(instants) - len(done)} pending; latest {done[-1].timestamp if done else '-'}\n")
    lag = MetadataTable(table.storage).lag(table.timeline)
    if lag:
        head += (f"behind the data table: {len(lag)} completed instant(s) not applied ({', '.join(lag[:3])}); "
                 "readers list storage until the next write rebuilds it\n")
    else:
        head += "in step with the data table's timeline: readers and writers plan from it\n"
    body = table_text(["Partition", "State", "File Groups", "Base Files", "Log Files"], rows)
    return head + body + "\n" + validate_text(validate(table))
