"""The ``partition_stats`` partition of the metadata table (Hudi 1.x, table versions 8 and 9).

Beside ``column_stats`` (per file and column), a partitioned table of version 8 or 9 keeps per
data partition and column one record of the same ``HoodieMetadataColumnStats`` shape, record type
6, keyed by the column's id followed by the partition's id (:func:`partition_stats_key`, the key
of column statistics without the file part). Its ``fileName`` holds the partition path, and its
range and counts are those of the column statistics of the files of the partition's latest file
slices merged: the smallest minimum, the largest maximum, value, null and size counts added up.
Such a record is a *tight bound* (``isTightBound`` true); a newer tight record replaces an older
one of its key, a deletion replaces anything (:func:`pyhudi.metadata.column_stats.merge`).

Which records Hudi 1.1 writes (``HoodieTableMetadataUtil.convertMetadataToPartitionStatRecords``,
verified on the samples in ``tests/data/hudi1x``): every commit recomputes the partitions it
wrote to, from the column statistics of the files it wrote and of the other files of the latest
slices of those partitions; a replace commit does not leave out the file groups it replaces (Hudi
compares file names with file-group ids there), so its partitions' ranges stay wider until the
next commit to them; ``delete_partition`` writes a deletion per column of each deleted partition;
a clean writes nothing. The file group is ``partition-stats-0000-0`` (one, by default).

The functions here are pure: they turn column statistics (in the metadata table's version
shape, :func:`pyhudi.metadata.column_stats.in_version`) into partition records; choosing the
files is the writer's part (:mod:`pyhudi.commit.partition_stats_build`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyhudi.metadata.column_stats import _ordered
from pyhudi.metadata.keys import column_id, partition_id

PARTITION = "partition_stats"
FILE_GROUP_PREFIX = "partition-stats-"
TYPE_PARTITION_STATS = 6
Records = list[tuple[str, dict]]


def partition_stats_key(column: str, partition: str) -> str:
    """``getPartitionStatsIndexKey``: the column's id, then the partition's."""
    return column_id(column) + partition_id(partition)


def key_prefixes(columns: Iterable[str], partition: str) -> tuple[str, ...]:
    """The ``column_stats`` key prefixes of ``columns`` in one data partition (column id +
    partition id), which select the statistics of that partition's files."""
    return tuple(sorted(partition_stats_key(c, partition) for c in columns))


def _record(partition: str, stats: dict) -> tuple[str, dict]:
    key = partition_stats_key(stats["columnName"], partition)
    return key, {"key": key, "type": TYPE_PARTITION_STATS, "ColumnStatsMetadata": stats}


def _combine(acc: dict | None, stats: dict) -> dict:
    """Two files' statistics of one column merged (``HoodieColumnRangeMetadata.merge``)."""
    if acc is None:
        return dict(stats)
    out = dict(acc)
    for field, pick in (("minValue", min), ("maxValue", max)):
        a, b = acc.get(field), stats.get(field)
        if a is None or b is None:
            out[field] = a if b is None else b
        else:
            x, y = _ordered(a, acc), _ordered(b, stats)
            out[field] = a if pick(x, y) == x else b
    for field in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        out[field] = (acc.get(field) or 0) + (stats.get(field) or 0)
    if out.get("valueType") is None:
        out["valueType"] = stats.get("valueType")
    return out


def aggregate(partition: str, files: Iterable[str], by_file: Mapping[str, Mapping[str, dict]],
              columns: Iterable[str], table_version: int) -> Records:
    """The partition records of ``columns`` over ``files`` (names in the partition), from the
    files' column statistics (file name -> column -> ``ColumnStatsMetadata``, version shape).

    A file without statistics of a column adds nothing to it, as in Hudi (a log file of deletes
    only has none). A file whose statistics of a column were retired (a deletion record: a log
    file appended to after blocks without statistics) leaves the column's bound unknown: its
    record is deleted, so that no reader prunes the partition by it."""
    names = sorted(set(files))
    out = []
    for column in sorted(set(columns)):
        acc: dict | None = None
        unknown = False
        for name in names:
            stats = by_file.get(name, {}).get(column)
            if stats is None:
                continue
            if stats.get("isDeleted") or stats.get("valueCount") is None:
                unknown = True
                break
            acc = _combine(acc, stats)
        if unknown:
            out += deleted_records(partition, [column], table_version)
        if unknown or acc is None:
            continue
        acc.update(fileName=partition, columnName=column, isDeleted=False)
        if table_version >= 8:
            acc["isTightBound"] = True
        if table_version < 9:
            acc.pop("valueType", None)
        out.append(_record(partition, acc))
    return out


def deleted_records(partition: str, columns: Iterable[str], table_version: int) -> Records:
    """Deletions of a partition's records (``delete_partition``; a column without a bound)."""
    out = []
    for column in columns:
        stats: dict[str, Any] = {
            "fileName": partition, "columnName": column, "minValue": None, "maxValue": None, "valueCount": None,
            "nullCount": None, "totalSize": None, "totalUncompressedSize": None, "isDeleted": True}
        if table_version >= 8:
            stats["isTightBound"] = True
        if table_version >= 9:
            stats["valueType"] = None
        out.append(_record(partition, stats))
    return out


def by_file(records: Iterable[tuple[str, dict]]) -> dict[str, dict[str, dict]]:
    """file name -> column -> statistics, from ``column_stats`` records already merged to one
    per key (:func:`pyhudi.metadata.column_stats.merged`)."""
    out: dict[str, dict[str, dict]] = {}
    for _key, record in records:
        stats = record.get("ColumnStatsMetadata") or {}
        out.setdefault(stats.get("fileName") or "", {})[stats.get("columnName") or ""] = stats
    return out
