"""insert_overwrite, insert_overwrite_table and delete_partition: replace commits that every other
part of the table honours (snapshot, time travel, incremental pulls, rollback, restore, cleaning)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.timeline.instant import REPLACE_COMMIT

SCHEMA = "key string, part string, ts long, val string"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def options(table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.clean.automatic": "false", **extra}


def write(spark, path: str, rows: list[tuple], opts: dict, operation: str = "upsert", **kw) -> str:
    res = pyhudi.write(spark.createDataFrame(rows, SCHEMA), path,
                       {**opts, "hoodie.datasource.write.operation": operation}, **kw)
    return res.instant_time


def state(spark, path: str, **read) -> list[tuple]:
    return sorted((r["key"], r["part"], r["val"]) for r in pyhudi.read(spark, path, **read).collect())


def rs_state(path: str, **kw) -> list[tuple]:
    return sorted((r["key"], r["part"], r["val"]) for r in hudi_rs_rows(path, **kw))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_replace_operations_are_honoured_everywhere(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = options(table_type)
    first = [(f"k{i}", DAYS[i % 3], 1, "v1") for i in range(9)]
    c1 = write(spark, path, first, opts)
    c2 = write(spark, path, [("k1", DAYS[1], 2, "v2")], opts)  # a log file on MOR
    after_c2 = sorted((k, p, "v2" if k == "k1" else v) for k, p, _, v in first)
    c3 = write(spark, path, [("n1", DAYS[0], 3, "new"), ("n2", DAYS[0], 3, "new")], opts, "insert_overwrite")
    after_c3 = sorted([r for r in after_c2 if r[1] != DAYS[0]] + [("n1", DAYS[0], "new"), ("n2", DAYS[0], "new")])
    table = pyhudi.HudiTable(path)
    meta = table.timeline.commit_metadata(table.timeline.completed_writes()[-1])
    assert table.timeline.completed_writes()[-1].action == REPLACE_COMMIT
    assert meta.operation_type == "INSERT_OVERWRITE" and list(meta.partition_to_replace_file_ids) == [DAYS[0]]
    assert state(spark, path) == after_c3 == rs_state(path)
    assert state(spark, path, options={"as.of.instant": c2}) == after_c2 == rs_state(path, as_of=c2)
    pull = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": c2}
    assert state(spark, path, options=pull) == [("n1", DAYS[0], "new"), ("n2", DAYS[0], "new")]

    # delete_partition by name and by wildcard; a name that matches nothing is refused, nothing written
    with pytest.raises(pyhudi.HudiConfigError, match="matches no partition"):
        write(spark, path, [], {**opts, "hoodie.datasource.write.partitions.to.delete": "2023-*"}, "delete_partition")
    c4 = write(spark, path, [], {**opts, "hoodie.datasource.write.partitions.to.delete": f"{DAYS[1]},*-03"},
               "delete_partition")
    assert state(spark, path) == [("n1", DAYS[0], "new"), ("n2", DAYS[0], "new")] == rs_state(path)
    assert state(spark, path, options={"as.of.instant": c3}) == after_c3
    assert pyhudi.HudiTable(path).timeline.commit_metadata(
        pyhudi.HudiTable(path).timeline.completed_writes()[-1]).operation_type == "DELETE_PARTITION"
    listing = pyhudi.HudiTable(path).metadata_listing()
    assert listing is not None and sorted(listing.partitions) == [DAYS[0]], "the metadata table lists them deleted"

    # rollback of the delete brings the partitions back; restore undoes the overwrite too
    pyhudi.rollback(path, c4)
    assert state(spark, path) == after_c3 == rs_state(path)
    pyhudi.create_savepoint(path, c2)
    pyhudi.restore(path, c2)
    assert state(spark, path) == after_c2 == rs_state(path)
    assert [i.timestamp for i in pyhudi.HudiTable(path).timeline.completed_writes()] == [c1, c2]


def test_cleaning_deletes_replaced_file_groups(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options("COPY_ON_WRITE", **{"hoodie.clean.automatic": "true", "hoodie.clean.commits.retained": "1"})
    write(spark, path, [(f"k{i}", DAYS[i % 3], 1, "v1") for i in range(6)], opts)
    day = Path(path) / DAYS[0]
    old = {f.name for f in day.glob("*.parquet")}
    write(spark, path, [("n1", DAYS[0], 2, "new")], opts, "insert_overwrite")
    assert old <= {f.name for f in day.glob("*.parquet")}, "replaced files stay until the cleaner's turn"
    for n in range(2):
        write(spark, path, [("k1", DAYS[1], 3 + n, f"u{n}")], opts)
    assert not old & {f.name for f in day.glob("*.parquet")}, "the cleaner deleted the replaced file group"
    assert [r for r in state(spark, path) if r[1] == DAYS[0]] == [("n1", DAYS[0], "new")]
    assert state(spark, path) == rs_state(path)


@pytest.mark.parametrize("index", ["BUCKET", "RECORD_INDEX"])
def test_overwrites_under_a_bucket_or_record_index(spark, tmp_path, index):
    """A bucket table's overwrite writes new file groups named after their buckets; the record index
    forgets the keys of replaced groups."""
    path = str(tmp_path / "t")
    opts = options("MERGE_ON_READ", **{"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"})
    write(spark, path, [(f"k{i}", DAYS[i % 3], 1, "v1") for i in range(9)], opts)
    write(spark, path, [("k0", DAYS[0], 2, "again")], opts, "insert_overwrite")
    write(spark, path, [("z", DAYS[2], 3, "table")], opts, mode="overwrite")
    assert state(spark, path) == [("z", DAYS[2], "table")] == rs_state(path)
    write(spark, path, [("z", DAYS[2], 4, "upd"), ("k3", DAYS[0], 4, "back")], opts)
    assert state(spark, path) == [("k3", DAYS[0], "back"), ("z", DAYS[2], "upd")] == rs_state(path)
    from pyhudi.cli.metadata import validate, validate_text

    check = validate(pyhudi.HudiTable(path))
    assert check.agrees, validate_text(check)
    ops = [pyhudi.HudiTable(path).timeline.commit_metadata(i).operation_type
           for i in pyhudi.HudiTable(path).timeline.completed_writes()]
    assert "INSERT_OVERWRITE" in ops and "INSERT_OVERWRITE_TABLE" in ops


@pytest.mark.parametrize("operation", ["insert_overwrite", "delete_partition"])
def test_a_compaction_pending_on_replaced_groups_does_not_bring_them_back(spark, tmp_path, operation):
    path = str(tmp_path / "t")
    opts = options("MERGE_ON_READ")
    write(spark, path, [(f"k{i}", DAYS[i % 3], 1, "v1") for i in range(6)], opts)
    write(spark, path, [("k0", DAYS[0], 2, "v2")], opts)  # a log file in DAYS[0]
    assert pyhudi.schedule_compaction(path)
    write(spark, path, [("n", DAYS[0], 3, "new")], opts, operation)
    expected = [(f"k{i}", DAYS[i % 3], "v1") for i in range(6) if i % 3] + \
        ([("n", DAYS[0], "new")] if operation == "insert_overwrite" else [])
    assert state(spark, path) == sorted(expected)
    pyhudi.compact(spark, path)  # rewrites the replaced group's slice, which stays retired
    assert state(spark, path) == sorted(expected) == rs_state(path)


def test_insert_overwrite_empties_a_partition_of_soft_deleted_rows_and_mode_overwrite_replaces_all(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options("COPY_ON_WRITE", **{"hoodie.combine.before.insert": "true"})
    write(spark, path, [(f"k{i}", DAYS[i % 3], 1, "v1") for i in range(6)], opts)
    rows = spark.createDataFrame([("k0", DAYS[0], 2, "gone", True), ("n", DAYS[1], 2, "new", False),
                                  ("n", DAYS[1], 1, "older", False)],
                                 "key string, part string, ts long, val string, _hoodie_is_deleted boolean")
    pyhudi.write(rows, path, {**opts, "hoodie.datasource.write.operation": "insert_overwrite"})
    assert state(spark, path) == [("k2", DAYS[2], "v1"), ("k5", DAYS[2], "v1"), ("n", DAYS[1], "new")] \
        == rs_state(path)
    # mode="overwrite" replaces the table whatever the operation (Hudi deletes it first)
    write(spark, path, [("z", DAYS[0], 3, "z")], opts, "insert_overwrite", mode="overwrite")
    assert state(spark, path) == [("z", DAYS[0], "z")] == rs_state(path)
