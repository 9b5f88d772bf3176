"""The metadata table's ``files`` partition, read from a table Apache Hudi 1.1 wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyhudi.metadata.files import read_files_partition
from pyhudi.table.table import HudiTable


def _listing(path: Path, *, drop_data_instant: str | None = None):
    table, mdt = HudiTable(str(path)), HudiTable(str(path / ".hoodie" / "metadata"))
    data_done = {i.timestamp for i in table.timeline.completed()} - {drop_data_instant}
    return read_files_partition(table.storage, mdt_completed={i.timestamp: i.completion_time
                                                              for i in mdt.timeline.completed()},
                                data_completed=data_done)


def test_files_partition_lists_what_storage_holds(v9_table):
    """Base HFile (after an MDT compaction) plus HFile log blocks of later delta commits, merged,
    give exactly the data files and sizes in storage: inserts, updates, deletes, an insert
    overwrite and a clustering went through that table."""
    listing = _listing(v9_table)
    assert listing.partitions == {"region=apac", "region=eu", "region=us"}
    for partition in sorted(listing.partitions):
        folder = v9_table / partition
        on_disk = {f: os.path.getsize(folder / f) for f in os.listdir(folder) if f.endswith(".parquet")}
        assert listing.partition_files(partition) == on_disk, partition


def test_records_of_a_data_instant_that_did_not_complete_are_ignored(v9_table):
    latest = max(i.timestamp for i in HudiTable(str(v9_table)).timeline.completed_writes())
    listing = _listing(v9_table, drop_data_instant=latest)
    written = {f for files in _listing(v9_table).files.values() for f in files if latest in f}
    assert written, "the latest commit wrote files"
    assert not {f for files in listing.files.values() for f in files} & written


def test_records_encode_as_hudi_encodes_them(v9_table):
    """Decoding the cells Hudi wrote and encoding the records again gives Hudi's bytes."""
    from pyhudi.io.hfile import HFileReader
    from pyhudi.metadata.files import decode_records, encode_records

    base = next((v9_table / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    reader = HFileReader(base.read_bytes())
    schema = reader.file_info["schema"].decode()
    assert encode_records(decode_records(reader, None), schema) == list(reader.items())


def test_a_log_block_pyhudi_writes_is_merged_after_hudis(v9_table, tmp_path):
    """An HFile log block of one more delta commit: a file deleted, a file added, a partition
    added; read back together with everything Apache Hudi wrote."""
    import shutil

    from pyhudi.io.hfile import HFileReader
    from pyhudi.io.log_format import hfile_data_block
    from pyhudi.metadata.files import encode_records, files_record, partitions_record

    table_dir = tmp_path / "t"
    shutil.copytree(v9_table, table_dir)
    files_dir = table_dir / ".hoodie" / "metadata" / "files"
    schema = HFileReader(next(files_dir.glob("*.hfile")).read_bytes()).file_info["schema"].decode()
    before = _listing(table_dir)
    gone = sorted(before.partition_files("region=eu"))[0]
    instant = "20300101000000000"
    records = [partitions_record(["region=mars"]), files_record("region=eu", {"new-0_0-1-1_x.parquet": 123}, [gone]),
               files_record("region=mars", {"red-0_0-1-1_x.parquet": 7})]
    (files_dir / f".files-0000-0_{instant}.log.1_0-0-0").write_bytes(
        hfile_data_block(encode_records(records, schema), schema, instant))
    table, mdt = HudiTable(str(table_dir)), HudiTable(str(table_dir / ".hoodie" / "metadata"))
    completed = {i.timestamp: i.completion_time for i in mdt.timeline.completed()}
    listing = read_files_partition(table.storage, mdt_completed={**completed, instant: "20300101000000001"})
    assert listing.partitions == before.partitions | {"region=mars"}
    eu = before.partition_files("region=eu")
    del eu[gone]
    assert listing.partition_files("region=eu") == {**eu, "new-0_0-1-1_x.parquet": 123}
    assert listing.partition_files("region=mars") == {"red-0_0-1-1_x.parquet": 7}
    # not completed on the MDT timeline: not read
    assert _listing(table_dir).files == before.files


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_converted_actions_add_up_to_the_storage_listing(spark, tmp_path, monkeypatch, table_type):
    """Folding every completed action of a pyhudi table into files-partition records, as the
    metadata writer will, lists exactly the files in storage: writes, updates, deletes,
    cleans, a compaction and the rollback of a failed write."""
    import pyhudi
    from pyhudi.metadata.convert import clean_records, commit_records, rollback_records
    from pyhudi.metadata.files import FileListing
    from pyhudi.timeline.avro_records import read_record

    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "m", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.clean.commits.retained": "1",
            "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
    schema = "id string, p string, ts long"
    pyhudi.write(spark.createDataFrame([(f"k{i}", f"p{i % 3}", 0) for i in range(30)], schema), path,
                 {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    for n in range(1, 4):
        pyhudi.write(spark.createDataFrame([(f"k{i}", f"p{i % 3}", n) for i in range(n, 30, 4)], schema), path, opts)
    pyhudi.write(spark.createDataFrame([("k1", "p1", 9)], schema), path,
                 {**opts, "hoodie.datasource.write.operation": "delete"})
    from pyhudi.spark import pipeline

    real_run = pipeline.Pipeline.run

    def fail(self, *args, commit, **kwargs):
        def boom(meta, **_kw):
            raise RuntimeError("killed before the commit")

        return real_run(self, *args, commit=boom, **kwargs)

    monkeypatch.setattr(pipeline.Pipeline, "run", fail)
    with pytest.raises(pyhudi.HudiCommitError):
        pyhudi.write(spark.createDataFrame([("k2", "p2", 10), ("new", "p3", 10)], schema), path, opts)
    monkeypatch.undo()
    table = HudiTable(path)
    listing = FileListing()
    for inst in table.timeline.completed():
        if inst.action in ("commit", "deltacommit", "replacecommit"):
            records = commit_records(table.timeline.commit_metadata(inst))
        elif inst.action == "clean":
            records = clean_records(read_record(table.timeline.read_bytes(inst)))
        elif inst.action == "rollback":
            records = rollback_records(read_record(table.timeline.read_bytes(inst)))
        else:
            continue
        for key, record in records:
            listing.apply(key, record)
    assert [i.action for i in table.timeline.completed() if i.action in ("clean", "rollback")]
    storage = {}
    for rel, info in table.storage.walk_files(""):
        if not rel.startswith(".hoodie/") and info.name != ".hoodie_partition_metadata":
            storage.setdefault(rel.rsplit("/", 1)[0], {})[info.name] = info.size
    assert {p: f for p, f in listing.files.items() if f} == storage
    assert listing.partitions >= set(storage)
    from conftest import hudi_rs_rows, pyhudi_rows

    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == \
        sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path))


def test_cli_shows_and_validates_the_metadata_table(v9_table, tmp_path, capsys):
    import shutil

    from pyhudi.cli import main

    assert main(["metadata", "validate", "--path", str(v9_table)]) == 0
    assert "metadata table agrees with storage: 3 partitions, 17 files" in capsys.readouterr().out
    assert main(["show", "metadata", "--path", str(v9_table)]) == 0
    out = capsys.readouterr().out
    assert "19 completed instants (18 delta commits, 1 compactions)" in out
    assert "| files " in out and "| record_index " in out and "usable" in out
    assert "in step with the data table" in out
    table_dir = tmp_path / "t"
    shutil.copytree(v9_table, table_dir)
    gone = sorted((table_dir / "region=eu").glob("*.parquet"))[0]
    gone.unlink()
    (table_dir / "region=us" / "stray.parquet").write_bytes(b"x")
    assert main(["metadata", "validate", "--path", str(table_dir)]) == 1
    out = capsys.readouterr().out
    assert f"only in the metadata table: region=eu/{gone.name}" in out
    assert "only in storage:            region=us/stray.parquet" in out
    shutil.rmtree(table_dir / ".hoodie" / "metadata")
    assert main(["metadata", "validate", "--path", str(table_dir)]) == 2
    assert "has no metadata table" in capsys.readouterr().err


def test_a_hudi_table_is_planned_from_its_metadata_table(spark, v9_table):
    """The table Apache Hudi 1.1 wrote is planned from its metadata table (not a listing) and reads
    exactly as hudi-rs reads it."""
    from conftest import hudi_rs_rows, pyhudi_rows

    table = HudiTable(str(v9_table))
    listing = table.metadata_listing()
    assert listing is not None
    view = table.file_system_view()
    assert view.listing is listing
    ours = sorted((r["txn_id"], r["amount"], r["_hoodie_commit_time"]) for r in pyhudi_rows(spark, v9_table))
    theirs = sorted((r["txn_id"], r["amount"], r["_hoodie_commit_time"]) for r in hudi_rs_rows(v9_table))
    assert ours == theirs and ours
