"""Catalog sync, the catalog-independent part (issue 31): partition changes since the last synced
instant, checked against a model of the table's live partitions after every step, and partition
values and locations as Hudi's extractors give them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import unzip_table

import pyhudi
from pyhudi.sync.partitions import (
    HudiPartitionValueError,
    PartitionChanges,
    partition_changes,
    partition_location,
    partition_values,
)

SCHEMA = "key string, part string, ts long"


def _apply(catalog: set[str], changes: PartitionChanges) -> set[str]:
    """What a catalog holds after applying the changes (adds first, then drops, as Hudi orders them)."""
    return (catalog | set(changes.added)) - set(changes.dropped)


# -- without Spark: the interop tables Apache Hudi wrote ---------------------------------------------
def test_full_listing_and_incremental_on_a_table_hudi_wrote(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_nonhivestyle.zip", tmp_path)
    table = pyhudi.HudiTable(str(path))
    c1, c2 = [i.timestamp for i in table.timeline.completed_writes()]
    full = partition_changes(table, last_synced=None, catalog_partitions=["20", "99"])
    assert full == PartitionChanges(added=("10", "30"), updated=(), dropped=("99",), last_synced=c2, full=True)
    # the second commit wrote 10 (an update) and 30 (new)
    inc = partition_changes(table, last_synced=c1, catalog_partitions=["10", "20"])
    assert (inc.added, inc.updated, inc.dropped, inc.full) == (("30",), ("10",), (), False)
    bare = partition_changes(table, last_synced=c1)  # no catalog: "added" = not live as of c1
    assert (bare.added, bare.updated, bare.dropped) == (("30",), ("10",), ())
    nothing = partition_changes(table, last_synced=c2, catalog_partitions=["10", "20", "30"])
    assert not nothing.changed and nothing.last_synced == c2
    # a last sync older than the active timeline (archived instants): a full listing
    assert partition_changes(table, last_synced="20200101000000000").full
    assert partition_changes(table, last_synced=c1, full=True).added == ("10", "20", "30")


def test_partition_values_and_locations(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_hivestyle_no_metafields.zip", tmp_path)
    table = pyhudi.HudiTable(str(path))
    cfg = table.config
    live = partition_changes(table, last_synced=None).added
    assert live == ("byteField=10", "byteField=20", "byteField=30")
    values = [partition_values(p, cfg.partition_fields, hive_style=cfg.hive_style) for p in live]
    assert values == [["10"], ["20"], ["30"]]
    assert partition_location(table.base_path, live[0]) == f"{table.base_path.rstrip('/')}/byteField=10"
    assert partition_location("s3a://b/t/", "") == "s3a://b/t"
    # MultiPartKeysValueExtractor, SinglePartPartitionValueExtractor, NonPartitionedExtractor
    assert partition_values("y=2024/m=01/dd", ["y", "m", "d"], hive_style=True) == ["2024", "01", "dd"]
    assert partition_values("2024/01/02", ["d"], hive_style=False) == ["2024/01/02"]
    assert partition_values("ts=2023/11/14", ["ts"], hive_style=True) == ["2023/11/14"]  # as Hudi splits it
    assert partition_values("", [], hive_style=False) == []
    for bad, fields, hive in [("a=1/b=2", ["a"], True), ("a", ["a"], True), ("a=1=2/b", ["a", "b"], False),
                              ("a=1", ["a", "b"], True)]:
        with pytest.raises(HudiPartitionValueError):
            partition_values(bad, fields, hive_style=hive)


# -- pyhudi writes: every kind of partition change -------------------------------------------------------
def _write(spark, path: str, rows: list[tuple], opts: dict, operation: str = "upsert", **extra: str) -> str:
    return pyhudi.write(spark.createDataFrame(rows, SCHEMA), path,
                        {**opts, "hoodie.datasource.write.operation": operation, **extra}).instant_time


@pytest.mark.parametrize("version", ["6", "9"])
def test_model_of_live_partitions(spark, tmp_path, version):
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": "COPY_ON_WRITE", "hoodie.metadata.enable": "false",
            "hoodie.clean.automatic": "false", "hoodie.write.table.version": version}
    catalog: set[str] = set()
    synced: tuple[str | None, str | None] = (None, None)

    def sync(expect: set[str], **expected: tuple[str, ...]) -> PartitionChanges:
        nonlocal catalog, synced
        table = pyhudi.HudiTable(path)
        changes = partition_changes(table, last_synced=synced[0], last_synced_completion=synced[1],
                                    catalog_partitions=catalog)
        for name, value in expected.items():
            assert getattr(changes, name) == value, (name, changes)
        catalog = _apply(catalog, changes)
        assert catalog == expect, changes
        synced = (changes.last_synced, changes.last_synced_completion)
        again = partition_changes(table, last_synced=synced[0], last_synced_completion=synced[1],
                                  catalog_partitions=catalog)
        assert not again.changed, again  # idempotent: a re-run asks for nothing
        return changes

    _write(spark, path, [("k1", "a", 1), ("k2", "b", 1)], opts, "insert")
    first = sync({"a", "b"}, added=("a", "b"), full=True)
    if version == "9":
        assert pyhudi.HudiTable(path).config.layout_version == 2 and first.last_synced_completion
    _write(spark, path, [("k1", "a", 2), ("k3", "c", 1)], opts)  # upsert a, insert into new c
    sync({"a", "b", "c"}, added=("c",), updated=("a",), dropped=(), full=False)
    _write(spark, path, [("k4", "b", 1)], opts, "insert_overwrite")  # b replaced, still live
    sync({"a", "b", "c"}, added=(), updated=("b",), dropped=())
    deleted = _write(spark, path, [], opts, "delete_partition", **{"hoodie.datasource.write.partitions.to.delete": "c"})
    sync({"a", "b"}, added=(), updated=(), dropped=("c",))
    # insert_overwrite_table: a and b replaced by d
    _write(spark, path, [("k5", "d", 1)], opts, "insert_overwrite_table")
    sync({"d"}, added=("d",), dropped=("a", "b"))
    after = _write(spark, path, [("k6", "d", 2)], opts)

    # a catalog that still holds c (its drop failed, or Hudi's sync missed it): a range holding only a
    # clean that removes c's replaced file group drops it, where Hudi's sync returns early
    results = pyhudi.clean(path, {"hoodie.clean.commits.retained": "1"})
    assert results and results[-1].files_deleted > 0
    table = pyhudi.HudiTable(path)
    assert table.timeline.completed()[-1].action == "clean"
    done = next(i for i in table.timeline.completed() if i.timestamp == after)
    changes = partition_changes(table, last_synced=after, last_synced_completion=done.completion_time,
                                catalog_partitions={"c", "d"})
    assert (changes.added, changes.updated, changes.dropped) == ((), (), ("c",)), changes
    assert partition_changes(table, last_synced=deleted, catalog_partitions={"a", "b", "c", "d"}).dropped == (
        "a", "b", "c")
    full = partition_changes(table, last_synced=None, catalog_partitions={"a", "c", "d"})
    assert (full.added, full.dropped, full.full) == ((), ("a", "c"), True)


def test_layout2_write_completing_after_the_sync_is_not_missed(spark, tmp_path):
    """A write requested before the last synced instant but completed after it (layout 2): found by
    its completion time, as Hudi's hollow-instant handling does."""
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.metadata.enable": "false", "hoodie.write.table.version": "9"}
    _write(spark, path, [("k1", "a", 1)], opts, "insert")
    _write(spark, path, [("k2", "b", 1)], opts, "insert")
    table = pyhudi.HudiTable(path)
    first, second = table.timeline.completed_writes()
    # the catalog synced "first" but with a completion time before "second" completed: pretend the
    # second was requested before first's sync point by syncing at a later requested time
    changes = partition_changes(table, last_synced=second.timestamp, last_synced_completion=first.completion_time,
                                catalog_partitions={"a"})
    assert changes.added == ("b",) and not changes.full
    assert partition_changes(table, last_synced=second.timestamp, last_synced_completion=second.completion_time,
                             catalog_partitions={"a"}).added == ()


def test_non_partitioned_table_registers_no_partition(interop_dir, tmp_path):
    table = pyhudi.HudiTable(str(unzip_table(interop_dir / "cow" / "v8_nonpartitioned.zip", Path(tmp_path))))
    assert not partition_changes(table, last_synced=None).changed
