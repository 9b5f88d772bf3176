"""Every entry point refuses what pyhudi does not implement of a table, naming it, before it
writes a file; and nothing pyhudi does not read is skipped.

Each case takes a copy of a small merge-on-read table pyhudi wrote and changes one thing as a Hudi
release would have it (a table property, a crafted log block), then calls the entry points:
reads (snapshot, read-optimized, incremental, time travel, ``spark.read.format("hudi")``),
writes (``pyhudi.write``, the streaming sink), table services (compaction, clustering, clean,
archival, rollback, restore, savepoints) through the Python API and the CLI. A refusal must be
a :class:`pyhudi.HudiUnsupportedError` whose message names the property and value, and leave every
file of the table as it was (``_files``).
"""

from __future__ import annotations

import os
import shutil

import pyspark
import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli import main as cli_main
from pyhudi.config import properties as P
from pyhudi.io.log_format import BlockType, HeaderKey, encode_block, hfile_data_block, read_log_file
from pyhudi.spark.streaming import HudiStreamSink

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.IntegerType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.metadata.enable": "false"}
ROWS = [("a", "x", 1, 1), ("b", "y", 1, 2), ("c", "x", 1, 3)]
MERGED = [("a", 10), ("b", 2), ("c", 3)]
RO = {"hoodie.datasource.query.type": "read_optimized"}


def _files(path) -> dict[str, int]:
    """Every file under ``path`` with its size: a refused call must leave all of them as they were."""
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


@pytest.fixture(scope="module")
def mor_table(spark, tmp_path_factory):
    """A merge-on-read table: an insert, then an update into a log file; copied by each case."""
    path = str(tmp_path_factory.mktemp("unsupported_1x") / "t")
    first = pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path,
                         {**OPTS, "hoodie.datasource.write.operation": "insert"}).instant_time
    pyhudi.write(spark.createDataFrame([("a", "x", 2, 10)], SCHEMA), path, OPTS)
    assert sorted((r["id"], r["v"]) for r in hudi_rs_rows(path)) == MERGED
    return path, first


def _copy(mor_table, tmp_path) -> tuple[str, str]:
    base, first = mor_table
    dest = str(tmp_path / "copy")
    shutil.copytree(base, dest)
    return dest, first


def _set(path: str, changes: dict[str, str | None]) -> None:
    pyhudi.HudiTable(path).update_properties(changes)


def _reads(spark, path: str, first: str) -> dict:
    """Every read entry point (``spark.read.format("hudi")``: Spark's Python data source, PySpark 4 on)."""
    more = {}
    if int(pyspark.__version__.split(".")[0]) >= 4:
        pyhudi.register(spark)
        more["format(hudi)"] = lambda: spark.read.format("hudi").load(path).collect()
    return {
        **more,
        "snapshot": lambda: pyhudi.read(spark, path).collect(),
        "read_optimized": lambda: pyhudi.read(spark, path, RO).collect(),
        "incremental": lambda: pyhudi.read(spark, path, {"hoodie.datasource.query.type": "incremental",
                                                         "hoodie.datasource.read.begin.instanttime": "0"}).collect(),
        "time travel": lambda: pyhudi.read(spark, path, {"as.of.instant": first}).collect(),
        "filtered": lambda: pyhudi.read(spark, path, filters="p = 'x'").collect(),
    }


def _writes(spark, path: str, first: str) -> dict:
    df = spark.createDataFrame([("d", "x", 3, 4)], SCHEMA)
    return {
        "write": lambda: pyhudi.write(df, path, OPTS),
        "streaming sink": lambda: HudiStreamSink(path, OPTS)(df, 0),
        "schedule_compaction": lambda: pyhudi.schedule_compaction(path),
        "compact": lambda: pyhudi.compact(spark, path),
        "schedule_clustering": lambda: pyhudi.schedule_clustering(path),
        "cluster": lambda: pyhudi.cluster(spark, path),
        "clean": lambda: pyhudi.clean(path),
        "archive": lambda: pyhudi.archive(path),
        "rollback": lambda: pyhudi.rollback(path),
        "create_savepoint": lambda: pyhudi.create_savepoint(path, first),
        "delete_savepoint": lambda: pyhudi.delete_savepoint(path, first),
        "restore": lambda: pyhudi.restore(path, first),
    }


CLI = [["show", "commits"], ["compaction", "schedule"], ["clustering", "schedule"], ["clean"], ["archive"],
       ["rollback"], ["savepoint", "create"], ["restore", "--instant", "1"]]


#: entry points that run pyhudi inside a Spark task or Python data source worker: the
#: HudiUnsupportedError arrives inside Spark's error, its type and message in the text
IN_SPARK = ("format(hudi)",)


def _refused(call, named: str, *, in_spark: bool = False) -> None:
    with pytest.raises(pyhudi.HudiUnsupportedError if not in_spark else Exception) as err:
        call()
    text = str(err.value)
    assert named in text and (not in_spark or "HudiUnsupportedError" in text), text[:3000]


def _all_refused(calls: dict, named: str, path: str, before: dict[str, int]) -> None:
    for name, call in calls.items():
        try:
            _refused(call, named, in_spark=name in IN_SPARK)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
        assert _files(path) == before, name


# -- table properties every entry point refuses ----------------------------------------------------

EVERYWHERE = [
    ({P.VERSION: "7"}, "hoodie.table.version=7"),
    ({P.VERSION: "10"}, "hoodie.table.version=10"),
    ({P.VERSION: "4"}, "hoodie.table.version=4"),
    ({P.LAYOUT_VERSION: "2"}, "hoodie.timeline.layout.version=2"),
    ({"hoodie.table.format": "iceberg"}, "hoodie.table.format=iceberg"),
    ({"hoodie.table.initial.version": "10"}, "hoodie.table.initial.version=10"),
    ({"hoodie.table.log.file.format": "PARQUET"}, "hoodie.table.log.file.format=PARQUET"),
    ({"hoodie.timeline.path": "tl"}, "hoodie.timeline.path=tl"),
    ({P.TYPE: "APPEND_ONLY"}, "hoodie.table.type=APPEND_ONLY"),
    # (data files pyhudi cannot read: the CLI still shows the timeline, which does not read them)
    ({P.BASE_FILE_FORMAT: "ORC"}, "hoodie.table.base.file.format=ORC"),
    ({P.BASE_FILE_FORMAT: "HFILE"}, "hoodie.table.base.file.format=HFILE"),
    ({P.DROP_PARTITION_COLUMNS: "true"}, "hoodie.datasource.write.drop.partition.columns=true"),
]


@pytest.mark.parametrize("changes, named", EVERYWHERE, ids=[n for _, n in EVERYWHERE])
def test_a_table_property_pyhudi_cannot_honour_refuses_every_entry_point(spark, mor_table, tmp_path, capsys,
                                                                        changes, named):
    path, first = _copy(mor_table, tmp_path)
    _set(path, changes)
    before = _files(path)
    _all_refused({**_reads(spark, path, first), **_writes(spark, path, first)}, named, path, before)
    data_files_only = P.BASE_FILE_FORMAT in changes or P.DROP_PARTITION_COLUMNS in changes
    for argv in CLI[1:] if data_files_only else CLI:
        assert cli_main([*argv, "--path", path]) == 2, argv
        assert named in capsys.readouterr().err, argv
    assert _files(path) == before


# -- tables pyhudi reads but does not write --------------------------------------------------------

def _assert_write_side_refused(spark, path: str, first: str, named: str, capsys) -> None:
    before = _files(path)
    _all_refused(_writes(spark, path, first), named, path, before)
    for argv in CLI[1:]:
        assert cli_main([*argv, "--path", path]) == 2, argv
        assert named in capsys.readouterr().err, argv
    assert _files(path) == before


def test_a_cdc_table_of_an_unknown_logging_mode_reads_but_every_write_and_service_is_refused(spark, mor_table,
                                                                                           tmp_path, capsys):
    path, first = _copy(mor_table, tmp_path)
    _set(path, {P.CDC_ENABLED: "true", "hoodie.table.cdc.supplemental.logging.mode": "EVERYTHING"})
    assert sorted((r["id"], r["v"]) for r in pyhudi_rows(spark, path)) == MERGED
    _assert_write_side_refused(spark, path, first, "hoodie.table.cdc.supplemental.logging.mode=EVERYTHING", capsys)


# -- merges pyhudi does not implement --------------------------------------------------------------

MERGES = [
    ({P.MERGE_MODE: "CUSTOM"}, "hoodie.record.merge.mode=CUSTOM"),
    ({"hoodie.compaction.record.merger.strategy": "1897ef5f-18bc-4557-939c-9d6a8afd1519"},
     "hoodie.compaction.record.merger.strategy=1897ef5f-18bc-4557-939c-9d6a8afd1519"),
    ({P.MERGE_MODE: "EVENT_TIME_ORDERING", "hoodie.record.merge.strategy.id": "ce9acb64-bde0-424c-9b91-f6ebba25356d"},
     "hoodie.record.merge.strategy.id=ce9acb64-bde0-424c-9b91-f6ebba25356d"),
    ({"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}, "hoodie.table.partial.update.mode=IGNORE_DEFAULTS"),
    ({"hoodie.record.merge.property.hoodie.payload.delete.field": "Op"},
     "hoodie.record.merge.property.hoodie.payload.delete.field=Op"),
    ({P.PAYLOAD_CLASS: "com.example.MyPayload"}, "com.example.MyPayload"),
]


@pytest.mark.parametrize("changes, named", MERGES, ids=[n.split("=")[0] for _, n in MERGES])
def test_a_merge_pyhudi_does_not_implement_refuses_what_merges(spark, mor_table, tmp_path, changes, named):
    """Merged reads, writes, compaction and clustering merge records of two writes: refused. The
    base files alone (read_optimized) read; cleaning and archival do not look at records."""
    path, first = _copy(mor_table, tmp_path)
    _set(path, changes)
    before = _files(path)
    calls = {**_reads(spark, path, first), **_writes(spark, path, first)}
    _all_refused({name: calls[name] for name in ("snapshot", "format(hudi)", "write", "streaming sink",
                                                  "schedule_compaction", "compact", "schedule_clustering", "cluster")
                  if name in calls}, named, path, before)
    ro = pyhudi.read(spark, path, {"hoodie.datasource.query.type": "read_optimized"}).collect()
    assert sorted((r["id"], r["v"]) for r in ro) == [("a", 1), ("b", 2), ("c", 3)]
    pyhudi.clean(path)


def test_a_version_8_merge_strategy_stands_for_its_mode():
    """In table version 8 the strategy id names the merge (6: the payload-based default merger)."""
    name = "t"
    cfg = P.TableConfig({P.NAME: name, P.VERSION: "8", "hoodie.record.merge.strategy.id":
                         "ce9acb64-bde0-424c-9b91-f6ebba25356d"})
    assert cfg.payload_class == "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
    v6 = P.TableConfig({P.NAME: name, P.VERSION: "6", P.PAYLOAD_CLASS: "org.apache.hudi.common.model."
                        "DefaultHoodieRecordPayload", "hoodie.compaction.record.merger.strategy":
                        "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"})
    assert v6.payload_class == "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    with pytest.raises(pyhudi.HudiUnsupportedError, match="ce9acb64"):
        _ = P.TableConfig({P.NAME: name, P.VERSION: "6", "hoodie.compaction.record.merger.strategy":
                           "ce9acb64-bde0-424c-9b91-f6ebba25356d"}).payload_class


# -- key generators --------------------------------------------------------------------------------

KEYGENS = [
    ({P.KEYGEN_CLASS: "com.example.MyKeyGenerator"}, "hoodie.table.keygenerator.class=com.example.MyKeyGenerator"),
    ({P.KEYGEN_CLASS: None, P.KEYGEN_TYPE: "GLOBAL_DELETE"}, "hoodie.table.keygenerator.type=GLOBAL_DELETE"),
    ({P.KEYGEN_CLASS: None, P.KEYGEN_TYPE: "AUTO_RECORD"}, "hoodie.table.keygenerator.type=AUTO_RECORD"),
]


@pytest.mark.parametrize("changes, named", KEYGENS, ids=[n.split("=")[1] for _, n in KEYGENS])
def test_a_key_generator_pyhudi_does_not_implement_refuses_writes(spark, mor_table, tmp_path, changes, named):
    """Keys and partition paths pyhudi cannot reproduce would miss the stored records; reads do not
    compute keys (and prune partitions by name only for key generators that name them by value)."""
    path, first = _copy(mor_table, tmp_path)
    _set(path, changes)
    before = _files(path)
    calls = _writes(spark, path, first)
    _all_refused({name: calls[name] for name in ("write", "streaming sink")}, named, path, before)
    assert sorted((r["id"], r["v"]) for r in pyhudi.read(spark, path, filters="p = 'x'").collect()) == \
        [("a", 10), ("c", 3)]


def test_a_key_generator_type_a_write_asks_for_is_refused(spark, tmp_path):
    df = spark.createDataFrame(ROWS, SCHEMA)
    with pytest.raises(pyhudi.HudiUnsupportedOptionError, match="keygenerator.type=GLOBAL_DELETE_AVRO"):
        pyhudi.write(df, str(tmp_path / "t"),
                     {**OPTS, "hoodie.datasource.write.keygenerator.type": "GLOBAL_DELETE_AVRO"})
    assert not (tmp_path / "t").exists()


def test_a_table_keyed_by_type_only_writes_with_that_key_generator(spark, tmp_path):
    """Hudi 1.x records ``hoodie.table.keygenerator.type`` and no class: a write takes the key
    generator from it (its _AVRO twin keys alike) and refuses another."""
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, OPTS)
    _set(path, {P.KEYGEN_CLASS: None, P.KEYGEN_TYPE: "SIMPLE_AVRO"})
    pyhudi.write(spark.createDataFrame([("a", "x", 5, 50)], SCHEMA), path, OPTS)
    assert sorted((r["_hoodie_record_key"], r["v"]) for r in hudi_rs_rows(path)) == [("a", 50), ("b", 2), ("c", 3)]
    before = _files(path)
    with pytest.raises(pyhudi.HudiTableMismatchError, match="keygenerator.type='SIMPLE_AVRO'"):
        pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path,
                     {**OPTS, "hoodie.datasource.write.keygenerator.class": "ComplexKeyGenerator"})
    assert _files(path) == before


def test_timestamp_partitions_recorded_as_a_type_are_not_pruned_by_value(spark, tmp_path):
    """A timestamp key generator names folders by date, not by the column's value: a filter on the
    column must not rule folders out by name, whether the table records the class or only the type."""
    path = str(tmp_path / "ts")
    opts = {**OPTS, "hoodie.datasource.write.partitionpath.field": "ts",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd", "hoodie.keygen.timebased.output.timezone": "UTC"}
    pyhudi.write(spark.createDataFrame([("a", "x", 1_700_000_000_000, 1), ("b", "x", 1_700_100_000_000, 2)], SCHEMA),
                 path, opts)
    _set(path, {P.KEYGEN_CLASS: None, P.KEYGEN_TYPE: "TIMESTAMP"})
    got = pyhudi.read(spark, path, filters="ts = 1700000000000").collect()
    assert [(r["id"], r["_hoodie_partition_path"]) for r in got] == [("a", "2023/11/14")]


# -- log blocks ------------------------------------------------------------------------------------

def _append(path: str, block: bytes) -> str:
    """Append ``block`` to the table's log file; its name."""
    table = pyhudi.HudiTable(path)
    logs = [lf for s in table.file_system_view().latest_slices() for lf in s.log_files]
    assert len(logs) == 1
    with open(os.path.join(path, logs[0].path), "ab") as f:
        f.write(block)
    return logs[0].name


def _latest(path: str) -> str:
    return pyhudi.HudiTable(path).timeline.completed_writes()[-1].timestamp


def _blocks(path: str, instant: str) -> dict[str, bytes]:
    schema = pyhudi.HudiTable(path).avro_schema()
    assert schema is not None
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema}
    return {
        "HFILE_DATA_BLOCK": hfile_data_block([(b"a", b"\x00")], schema, instant),
        "CDC_DATA_BLOCK": encode_block(BlockType.CDC_DATA_BLOCK, header, b"\x00\x00\x00\x03\x00\x00\x00\x00"),
        "unknown block type 9": encode_block(9, header, b""),  # type: ignore[arg-type]
        "command type 1": encode_block(BlockType.COMMAND_BLOCK, {HeaderKey.INSTANT_TIME: instant,
                                                                 HeaderKey.COMMAND_BLOCK_TYPE: "1",
                                                                 HeaderKey.TARGET_INSTANT_TIME: instant}, b""),
    }


@pytest.mark.parametrize("kind, named", [("HFILE_DATA_BLOCK", "HFILE_DATA_BLOCK"), ("CDC_DATA_BLOCK", "CDC_DATA_BLOCK"),
                                         ("unknown block type 9", "unknown block type 9"),
                                         ("command type 1", "COMMAND_BLOCK at byte offset")])
def test_a_log_block_pyhudi_does_not_read_fails_reads_naming_it_and_the_file(spark, mor_table, tmp_path, kind, named):
    """Hudi's log readers fail on a block they do not know; skipping it would drop its records
    from the answer. The read fails naming the block and the log file (in a Spark task of the
    merged read, so the HudiUnsupportedError arrives inside Spark's error)."""
    path, _first = _copy(mor_table, tmp_path)
    name = _append(path, _blocks(path, _latest(path))[kind])
    before = _files(path)
    for query in ({}, {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "0"}):
        with pytest.raises(Exception) as err:
            pyhudi.read(spark, path, query).collect()
        text = str(err.value)
        assert "HudiUnsupportedError" in text and named in text and name in text, text[:3000]
    assert _files(path) == before
    ro = pyhudi.read(spark, path, {"hoodie.datasource.query.type": "read_optimized"}).collect()
    assert sorted((r["id"], r["v"]) for r in ro) == [("a", 1), ("b", 2), ("c", 3)]


def test_blocks_hudi_skips_are_skipped_as_hudi_skips_them(spark, mor_table, tmp_path):
    """A corrupt block between valid ones (Hudi re-syncs on the next magic and skips it), and a
    block of a kind pyhudi does not read that a rollback voided, leave the answer as it was."""
    path, _first = _copy(mor_table, tmp_path)
    latest = _latest(path)
    void = "20990101000000000"
    hfile = hfile_data_block([(b"a", b"\x00")], pyhudi.HudiTable(path).avro_schema() or "", void)
    rollback = encode_block(BlockType.COMMAND_BLOCK, {HeaderKey.INSTANT_TIME: "20990101000000001",
                                                      HeaderKey.COMMAND_BLOCK_TYPE: "0",
                                                      HeaderKey.TARGET_INSTANT_TIME: void}, b"")
    corrupt = b"#HUDI#" + b"\x00" * 40
    name = _append(path, hfile + corrupt + rollback)
    blocks = read_log_file(pyhudi.HudiTable(path).storage, next(
        os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns if n == name))
    assert [b.block_type for b in blocks][-3:] == [BlockType.HFILE_DATA_BLOCK, BlockType.CORRUPT_BLOCK,
                                                   BlockType.COMMAND_BLOCK]
    assert latest < void
    assert sorted((r["id"], r["v"]) for r in pyhudi_rows(spark, path)) == MERGED


# -- metadata table partitions pyhudi does not read ------------------------------------------------

def test_metadata_partitions_pyhudi_does_not_read_leave_data_skipping_right(spark, v9_table, tmp_path):
    """The Hudi 1.1 table declares partition_stats and secondary indexes, which pyhudi does not
    read: its filtered reads list files through the files partition and prune by column_stats
    only, and return what hudi-rs returns filtered; an unknown partition declared changes nothing."""
    path = str(tmp_path / "v9")
    shutil.copytree(v9_table, path)
    declared = pyhudi.HudiTable(path).config.metadata_partitions
    assert "partition_stats" in declared and any(p.startswith("secondary_index_") for p in declared)
    rows = hudi_rs_rows(path)
    for where, keep in (("region = 'us'", lambda r: r["region"] == "us"),
                        ("txn_id = 'TXN-004'", lambda r: r["txn_id"] == "TXN-004"),
                        ("merchant_name = 'Nobody'", lambda r: r["merchant_name"] == "Nobody")):
        expected = sorted(r["txn_id"] for r in rows if keep(r))
        assert sorted(r["txn_id"] for r in pyhudi.read(spark, path, filters=where).collect()) == expected, where
    props = (tmp_path / "v9" / ".hoodie" / "hoodie.properties")
    text = props.read_text().replace("hoodie.table.metadata.partitions=", "hoodie.table.metadata.partitions="
                                     "expr_index_unknown,")
    props.write_text(text)  # the checksum covers the name only
    assert sorted(r["txn_id"] for r in pyhudi.read(spark, path, filters="region = 'us'").collect()) == \
        sorted(r["txn_id"] for r in rows if r["region"] == "us")
