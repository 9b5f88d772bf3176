"""MOR log files: framing, data/delete/command blocks, damage handling, and the real Hudi files.

The interop zips hold log files written by Apache Hudi 0.14/0.15 on Spark; decoding them and
re-encoding their records must give back Hudi's bytes, and files we write in their place must
read the same through hudi-rs (the independent reader).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from decimal import Decimal
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import hudi_rs_rows, unzip_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyhudi.errors import HudiCorruptFileError, HudiSchemaError, HudiUnsupportedError
from pyhudi.io.avro_codec import encode_fastavro, encode_flat, flat_plan, load_schema
from pyhudi.io.avro_schema import table_avro_schema
from pyhudi.io.log_format import (
    MAGIC,
    ROLLBACK_COMMAND,
    BlockType,
    HeaderKey,
    LogBlock,
    avro_data_block,
    avro_to_arrow_schema,
    data_block_records,
    delete_block,
    delete_block_records,
    encode_block,
    has_valid_tail,
    parquet_data_block,
    read_blocks,
    read_log_file,
    rollback_block,
)
from pyhudi.storage.fs import Storage

T1, T2, T3 = "20250101000000000", "20250102000000000", "20250103000000000"

# -- the real files ------------------------------------------------------------------------
TRIPS = {  # uuid -> (rider, fare) of the trips tables' inserts
    "334e26e9-8355-45cc-97c6-c31daf0df330": ("rider-A", 19.10),
    "e96c4396-3fad-413a-a942-4cb36106d721": ("rider-C", 27.70),
    "9909a8b1-2d15-4d3d-8ec9-efc48c536a00": ("rider-D", 33.90),
    "1dced545-862b-4ceb-8b43-d2a568f6616b": ("rider-E", 93.50),
    "e3cf430c-889d-4015-bc98-59bdce1e530c": ("rider-F", 34.15),
    "7a84095f-737f-40bc-b62f-6b69664712d2": ("rider-G", 43.40),
    "3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04": ("rider-I", 41.06),
    "c8abbe79-8d89-47ea-b4ce-4d224bae5bfa": ("rider-J", 17.85),
}
RIDER_KEY = {rider: key for key, (rider, _) in TRIPS.items()}


def _unzip(interop_dir: Path, tmp_path: Path, kind: str, name: str) -> Path:
    return unzip_table(interop_dir / "mor" / kind / f"{name}.zip", tmp_path)


def _log_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob(".*.log.*") if ".hoodie" not in p.parts)


def _deltacommits(table: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in (table / ".hoodie").glob("*.deltacommit"))


def _only_block(path: Path) -> LogBlock:
    blocks = read_blocks(path.read_bytes(), source=str(path))
    assert len(blocks) == 1
    assert blocks[0].offset == 0 and blocks[0].size == path.stat().st_size
    return blocks[0]


@pytest.mark.parametrize("kind,name", [("avro", "v6_trips_8i1u"), ("avro", "v6_trips_8i3d"),
                                       ("parquet", "v6_nonpartitioned"),
                                       ("parquet", "v6_simplekeygen_nonhivestyle")])
def test_every_interop_log_file_parses(interop_dir, tmp_path, kind, name):
    table = _unzip(interop_dir, tmp_path, kind, name)
    logs = _log_files(table)
    assert logs, f"{name} has no log files"
    storage = Storage(str(table))
    for path in logs:
        blocks = read_log_file(storage, str(path.relative_to(table)))
        assert blocks and all(b.block_type != BlockType.CORRUPT_BLOCK for b in blocks)
        assert blocks[-1].offset + blocks[-1].size == path.stat().st_size
        assert has_valid_tail(storage, str(path.relative_to(table)))
        for block in blocks:
            # written by the second (update/delete) deltacommit, with the table schema incl. meta fields
            assert block.instant_time == _deltacommits(table)[-1]
            assert block.footer == {}
            assert [f.name for f in avro_to_arrow_schema(block.schema)][:3] == [
                "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key"]


def test_avro_update_block_decodes_and_reencodes_to_hudis_bytes(interop_dir, tmp_path):
    table = _unzip(interop_dir, tmp_path, "avro", "v6_trips_8i1u")
    (path,) = _log_files(table)
    block = _only_block(path)
    assert block.block_type == BlockType.AVRO_DATA_BLOCK
    assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    rows = data_block_records(block).to_pylist()
    key = RIDER_KEY["rider-D"]
    assert rows == [{
        "_hoodie_commit_time": block.instant_time, "_hoodie_commit_seqno": f"{block.instant_time}_0_1",
        "_hoodie_record_key": key, "_hoodie_partition_path": "city=san_francisco",
        "_hoodie_file_name": path.name[1:].split("_")[0], "ts": 1695046462179, "uuid": key,
        "rider": "rider-D", "driver": "driver-L", "fare": 25.0, "city": "san_francisco"}]
    again = avro_data_block(data_block_records(block), block.schema, block.instant_time)
    assert again == path.read_bytes()


def test_delete_block_decodes_and_reencodes_to_hudis_bytes(interop_dir, tmp_path):
    table = _unzip(interop_dir, tmp_path, "avro", "v6_trips_8i3d")
    (path,) = _log_files(table)
    block = _only_block(path)
    assert block.block_type == BlockType.DELETE_BLOCK
    assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}  # Spark writes the schema too
    deletes = delete_block_records(block)
    assert deletes.schema.names == ["record_key", "partition_path", "ordering_is_default", "ordering_value"]
    assert set(deletes.column("record_key").to_pylist()) == {RIDER_KEY[r] for r in ("rider-A", "rider-C", "rider-D")}
    assert set(deletes.column("partition_path").to_pylist()) == {"city=san_francisco"}
    assert deletes.column("ordering_is_default").to_pylist() == [True] * 3
    assert deletes.column("ordering_value").to_pylist() == ["0"] * 3
    mine = delete_block(deletes.column("record_key").combine_chunks(), deletes.column("partition_path").to_pylist(),
                        block.instant_time, avro_schema=block.schema)
    assert read_blocks(mine, source="mine")[0].content == block.content
    assert len(mine) == path.stat().st_size  # same header entries, Java writes them in another order


@pytest.mark.parametrize("name,partition", [("v6_nonpartitioned", ""), ("v6_simplekeygen_nonhivestyle", "10")])
def test_parquet_block_decodes_all_types(interop_dir, tmp_path, name, partition):
    table = _unzip(interop_dir, tmp_path, "parquet", name)
    (path,) = _log_files(table)
    block = _only_block(path)
    assert block.block_type == BlockType.PARQUET_DATA_BLOCK
    assert block.content[:4] == b"PAR1" and block.content[-4:] == b"PAR1"
    records = data_block_records(block)
    assert records.schema == avro_to_arrow_schema(block.schema)
    (row,) = records.to_pylist()  # the second INSERT updated id 1 (id 4 went to a new base file)
    assert row["_hoodie_record_key"] == "1" and row["_hoodie_partition_path"] == partition
    assert (row["id"], row["name"], row["isActive"], row["shortField"], row["longField"]) == (
        1, "Alice", False, 300, 1234567890)
    assert row["decimalField"] == Decimal("12345.67890")
    assert row["dateField"] == dt.date(2023, 4, 1)
    assert row["timestampField"] == dt.datetime(2023, 4, 1, 12, 1, tzinfo=dt.timezone.utc)
    assert row["binaryField"] == b"binary data"
    assert [e["arr_struct_f1"] for e in row["arrayField"]] == ["red", "blue", "green"]
    assert dict(row["mapField"])["key2"] == {"map_field_value_struct_f1": 789.012, "map_field_value_struct_f2": False}
    assert row["structField"]["child_struct"] == {"child_field1": 123.456, "child_field2": True}
    # asked for a schema: those columns, in that order, cast, absent ones null
    wanted = pa.schema([("name", pa.string()), ("id", pa.int64()), ("not_there", pa.float64())])
    assert data_block_records(block, wanted).to_pylist() == [{"name": "Alice", "id": 1, "not_there": None}]


# -- hudi-rs reads what we write -----------------------------------------------------------
@pytest.fixture
def hudi_rs():
    return pytest.importorskip("hudi", reason="hudi-rs (PyPI 'hudi') is the independent reader")


def test_hudi_rs_reads_our_avro_block(interop_dir, tmp_path, hudi_rs):
    table = _unzip(interop_dir, tmp_path, "avro", "v6_trips_8i1u")
    (path,) = _log_files(table)
    block = _only_block(path)
    records = data_block_records(block)
    records = records.set_column(records.schema.get_field_index("fare"), "fare", pa.array([77.25]))
    path.write_bytes(avro_data_block(records, block.schema, block.instant_time))
    fares = {r["uuid"]: r["fare"] for r in hudi_rs_rows(table)}
    assert fares == {k: (77.25 if rider == "rider-D" else fare) for k, (rider, fare) in TRIPS.items()}


def test_hudi_rs_reads_our_delete_block(interop_dir, tmp_path, hudi_rs):
    table = _unzip(interop_dir, tmp_path, "avro", "v6_trips_8i3d")
    (path,) = _log_files(table)
    block = _only_block(path)
    keys = [RIDER_KEY["rider-A"], RIDER_KEY["rider-C"]]  # not rider-D this time
    path.write_bytes(delete_block(keys, ["city=san_francisco"] * 2, block.instant_time))
    riders = sorted(r["rider"] for r in hudi_rs_rows(table))
    assert riders == sorted(rider for rider, _ in TRIPS.values() if rider not in ("rider-A", "rider-C"))


def test_hudi_rs_reads_our_parquet_block(interop_dir, tmp_path, hudi_rs):
    table = _unzip(interop_dir, tmp_path, "parquet", "v6_nonpartitioned")
    (path,) = _log_files(table)
    block = _only_block(path)
    records = data_block_records(block)
    records = records.set_column(records.schema.get_field_index("name"), "name", pa.array(["Alicia"]))
    path.write_bytes(parquet_data_block(records, block.schema, block.instant_time))
    rows = {r["id"]: r for r in hudi_rs_rows(table)}
    assert {i: r["name"] for i, r in rows.items()} == {1: "Alicia", 2: "Bob", 3: "Carol", 4: "Diana"}
    assert rows[1]["decimalField"] == Decimal("12345.67890")
    assert rows[1]["structField"]["child_struct"]["child_field1"] == 123.456


# -- framing -------------------------------------------------------------------------------
meta_values = st.text(max_size=40)
headers = st.dictionaries(st.integers(0, 8), meta_values, max_size=4)


def _framed(spec: tuple) -> tuple:
    """A command block names the one command Hudi knows (rollback, ``0``): readers refuse others."""
    block_type, header, content, footer = spec
    if block_type == BlockType.COMMAND_BLOCK:
        header = {**header, HeaderKey.COMMAND_BLOCK_TYPE: "0"}
    return block_type, header, content, footer


@given(st.lists(st.tuples(st.sampled_from(list(BlockType)), headers, st.binary(max_size=300), headers).map(_framed),
                min_size=1, max_size=4))
def test_encode_block_round_trip(specs):
    data = b"".join(encode_block(t, h, c, f) for t, h, c, f in specs)
    blocks = read_blocks(data, source="mem")
    assert [(b.block_type, b.header, b.content, b.footer) for b in blocks] == specs
    assert blocks[0].offset == 0
    assert all(a.offset + a.size == b.offset for a, b in zip(blocks, blocks[1:]))
    assert blocks[-1].offset + blocks[-1].size == len(data)


def test_block_layout_matches_the_format_description():
    block = encode_block(BlockType.DELETE_BLOCK, {HeaderKey.INSTANT_TIME: T1}, b"xyz")
    header = struct.pack(">iii", 1, 0, 17) + T1.encode()
    body = struct.pack(">ii", 1, 1) + header + struct.pack(">q", 3) + b"xyz" + struct.pack(">i", 0)
    assert block == MAGIC + struct.pack(">q", len(body) + 8) + body + struct.pack(">q", len(body) + 8 + 6)


def test_rollback_block_is_the_command_block_java_writes():
    block = rollback_block(T2, T1)
    # header order as Hudi writes it: INSTANT_TIME, COMMAND_BLOCK_TYPE, TARGET_INSTANT_TIME
    header = struct.pack(">i", 3) + b"".join(struct.pack(">ii", k, len(v)) + v.encode()
                                             for k, v in [(0, T2), (3, "0"), (1, T1)])
    body = struct.pack(">ii", 1, 0) + header + struct.pack(">q", 0) + struct.pack(">i", 0)
    assert block == MAGIC + struct.pack(">q", len(body) + 8) + body + struct.pack(">q", len(body) + 14)
    (parsed,) = read_blocks(block, source="mem")
    assert parsed.block_type == BlockType.COMMAND_BLOCK and parsed.content == b""
    assert (parsed.instant_time, parsed.target_instant_time) == (T2, T1)
    assert parsed.header[HeaderKey.COMMAND_BLOCK_TYPE] == ROLLBACK_COMMAND and parsed.schema is None


# -- damaged files -------------------------------------------------------------------------
def _two_blocks() -> tuple[bytes, bytes]:
    rows = pa.table({"k": ["a", "b"], "v": [1, 2]})
    schema = table_avro_schema(rows.schema, "t")
    return avro_data_block(rows, schema, T1), delete_block(["a"], [""], T2)


def test_truncated_tail_returns_the_blocks_before_it():
    first, second = _two_blocks()
    for cut in range(len(first), len(first) + len(second)):
        blocks = read_blocks(first + second[:cut - len(first)], source="cut")
        assert [(b.block_type, b.content) for b in blocks] == [(BlockType.AVRO_DATA_BLOCK, read_blocks(
            first, source="x")[0].content)], f"cut at {cut}"
    for cut in range(1, len(first)):
        assert read_blocks(first[:cut], source="cut") == [], f"cut at {cut}"


def test_bad_reverse_pointer_or_size_of_the_last_block_drops_it():
    first, second = _two_blocks()
    broken_pointer = first + second[:-1] + bytes([second[-1] ^ 1])
    assert [b.block_type for b in read_blocks(broken_pointer, source="x")] == [BlockType.AVRO_DATA_BLOCK]
    broken_size = first + second[:6] + struct.pack(">q", len(second)) + second[14:]
    assert [b.block_type for b in read_blocks(broken_size, source="x")] == [BlockType.AVRO_DATA_BLOCK]
    broken_magic = first + b"#HUDX#" + second[6:]
    assert [b.block_type for b in read_blocks(broken_magic, source="x")] == [BlockType.AVRO_DATA_BLOCK]


def test_damage_followed_by_a_valid_block_becomes_a_corrupt_block():
    first, second = _two_blocks()
    third = rollback_block(T3, T2)
    garbage = b"\x00garbage #HUDI# not a block\xff"
    blocks = read_blocks(first + garbage + second + third, source="x")
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA_BLOCK, BlockType.CORRUPT_BLOCK,
                                              BlockType.DELETE_BLOCK, BlockType.COMMAND_BLOCK]
    assert blocks[1].content == garbage and blocks[1].offset == len(first) and blocks[1].size == len(garbage)
    assert delete_block_records(blocks[2]).column("record_key").to_pylist() == ["a"]
    # a crashed writer's half block, then a later writer's complete block appended behind it
    blocks = read_blocks(first[:50] + second, source="x")
    assert [(b.block_type, b.offset, b.size) for b in blocks] == [
        (BlockType.CORRUPT_BLOCK, 0, 50), (BlockType.DELETE_BLOCK, 50, len(second))]
    # inconsistent size field in the middle block
    middle = second[:6] + struct.pack(">q", len(second) - 20) + second[14:]
    blocks = read_blocks(first + middle + third, source="x")
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA_BLOCK, BlockType.CORRUPT_BLOCK,
                                              BlockType.COMMAND_BLOCK]


def test_not_a_log_file_is_an_error_naming_file_and_offset():
    first, _ = _two_blocks()
    with pytest.raises(HudiCorruptFileError, match=r"some/file.*offset 0"):
        read_blocks(b"PAR1" + first, source="some/file")
    assert read_blocks(b"", source="empty") == []


def test_unknown_block_type_or_format_version_is_unsupported():
    good = encode_block(BlockType.COMMAND_BLOCK, {0: T1}, b"")
    with pytest.raises(HudiUnsupportedError, match="block type 9"):
        read_blocks(good[:18] + struct.pack(">i", 9) + good[22:], source="x")
    with pytest.raises(HudiUnsupportedError, match="format version 2"):
        read_blocks(good[:14] + struct.pack(">i", 2) + good[18:], source="x")


def test_has_valid_tail(tmp_path):
    storage = Storage(str(tmp_path))
    first, second = _two_blocks()
    cases = {"good": first + second, "one": first, "empty": b"", "cut": first + second[:-3],
             "junk": first + second + b"\x00" * 8, "short": b"#HUDI#", "garbage": b"x" * 100,
             "pointer": first + second[:-8] + struct.pack(">q", 10**12),
             # the pointer leads to the second block's magic, but that block ends 8 bytes before EOF
             "stale": first + second + struct.pack(">q", len(second)),
             # the pointer leads into the middle of a block
             "inside": first + second[:-8] + struct.pack(">q", len(second) - 10),
             "magic": first + b"#HUDX#" + second[6:]}
    for name, data in cases.items():
        storage.write_bytes(name, data)
    assert {n: has_valid_tail(storage, n) for n in cases} == {
        "good": True, "one": True, "empty": True, "cut": False, "junk": False, "short": False,
        "garbage": False, "pointer": False, "stale": False, "inside": False,
        "magic": False}
    with pytest.raises(FileNotFoundError):
        has_valid_tail(storage, "missing")


# -- data blocks ---------------------------------------------------------------------------
FLAT_TYPES = {
    "string": (pa.string(), st.text(max_size=12)),
    "binary": (pa.binary(), st.binary(max_size=12)),
    "int": (pa.int32(), st.integers(-2**31, 2**31 - 1)),
    "long": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "float": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "double": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "date": (pa.date32(), st.dates()),
    "ts": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(dt.timezone.utc))),
    "local_ts_ms": (pa.timestamp("ms"), st.datetimes().map(lambda d: d.replace(microsecond=d.microsecond // 1000
                                                                                * 1000))),
}


@st.composite
def flat_tables(draw) -> pa.Table:
    kinds = draw(st.lists(st.sampled_from(sorted(FLAT_TYPES)), min_size=1, max_size=6))
    n = draw(st.integers(0, 25))
    fields, columns = [], []
    for i, kind in enumerate(kinds):
        dtype, values = FLAT_TYPES[kind]
        nullable = draw(st.booleans())
        column = draw(st.lists(st.none() | values if nullable else values, min_size=n, max_size=n))
        fields.append(pa.field(f"c{i}_{kind}", dtype, nullable=nullable))
        columns.append(pa.array(column, dtype))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(flat_tables())
def test_vectorized_encoder_is_byte_equal_to_fastavro_and_round_trips(table):
    schema = table_avro_schema(table.schema, "t", with_meta_fields=False)
    record = load_schema(schema)
    plan = flat_plan(record)
    assert plan is not None
    assert encode_flat(table, plan, length_prefix=True) == encode_fastavro(table, record, length_prefix=True)
    (block,) = read_blocks(avro_data_block(table, schema, T1), source="mem")
    decoded = data_block_records(block)
    assert decoded.schema == avro_to_arrow_schema(schema)
    assert decoded.to_pylist() == table.cast(decoded.schema).to_pylist()


def test_vectorized_encoder_edge_values():
    table = pa.table({
        "s": pa.array(["", "é漢字🙂", None, "x" * 300], pa.string()),
        "b": pa.array([b"", b"\x00\xff", None, b"y" * 70000], pa.binary()),
        "l": pa.array([0, -1, None, -2**63], pa.int64()),
        "i": pa.array([2**31 - 1, -2**31, 63, -64], pa.int32()),
        "d": pa.array([float("inf"), -0.0, None, float("nan")], pa.float64()),
        "f": pa.array([1.5, None, float("-inf"), 0.0], pa.float32()),
        "t": pa.array([True, False, None, True]),
    })
    schema = table_avro_schema(table.schema, "t")
    record = load_schema(schema)
    plan = flat_plan(record)
    assert plan is not None
    assert encode_flat(table, plan, length_prefix=False) == encode_fastavro(table, record, length_prefix=False)
    decoded = data_block_records(read_blocks(avro_data_block(table, schema, T1), source="x")[0])
    assert decoded.column("s").to_pylist() == table.column("s").to_pylist()
    assert decoded.column("b").to_pylist() == table.column("b").to_pylist()
    assert decoded.column("l").to_pylist() == table.column("l").to_pylist()
    assert decoded.column("i").to_pylist() == table.column("i").to_pylist()
    d = decoded.column("d").to_pylist()
    assert d[:3] == [float("inf"), -0.0, None] and np.isnan(d[3]) and str(d[1]) == "-0.0"
    assert decoded.column("t").to_pylist() == [True, False, None, True]


def test_missing_nullable_column_is_null_and_required_nulls_are_refused():
    schema = table_avro_schema(pa.schema([pa.field("k", pa.string(), nullable=False), ("v", pa.int64())]), "t")
    (block,) = read_blocks(avro_data_block(pa.table({"k": ["a"]}), schema, T1), source="x")
    decoded = data_block_records(block)
    assert decoded.to_pylist() == [{"k": "a", "v": None}]
    with pytest.raises(HudiSchemaError, match="k"):
        avro_data_block(pa.table({"k": pa.array([None], pa.string())}), schema, T1)


NESTED = pa.schema([
    ("id", pa.int32()),
    ("price", pa.decimal128(10, 5)),
    ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.struct([("x", pa.float64()), ("ok", pa.bool_())]))),
    ("inner", pa.struct([("a", pa.string()), ("deep", pa.struct([("b", pa.int64())]))])),
    ("when", pa.timestamp("us", tz="UTC")),
    ("day", pa.date32()),
])
NESTED_ROWS = [
    {"id": 1, "price": Decimal("12345.67890"), "tags": ["a", "b"], "attrs": [("k", {"x": 1.5, "ok": True})],
     "inner": {"a": "x", "deep": {"b": 7}}, "when": dt.datetime(2023, 4, 1, 12, 1, tzinfo=dt.timezone.utc),
     "day": dt.date(2023, 4, 1)},
    {"id": None, "price": Decimal("-0.00001"), "tags": [], "attrs": [], "inner": {"a": None, "deep": None},
     "when": None, "day": None},
    {"id": 3, "price": None, "tags": None, "attrs": None, "inner": None, "when": None, "day": dt.date(1969, 12, 31)},
]


def test_nested_fields_go_through_fastavro_and_round_trip():
    table = pa.Table.from_pylist(NESTED_ROWS, schema=NESTED)
    schema = table_avro_schema(NESTED, "t", with_meta_fields=True)
    record = load_schema(schema)
    plan = flat_plan(record)
    assert plan is not None and flat_plan(record, mixed=False) is None
    assert [f.kind for f in plan][5:] == ["int", "decimal", "avro", "avro", "avro", "long", "int"]
    assert encode_flat(table, plan, length_prefix=True) == encode_fastavro(table, record, length_prefix=True)
    (block,) = read_blocks(avro_data_block(table, schema, T1), source="x")
    records = data_block_records(block)
    assert records.column_names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                        "_hoodie_partition_path", "_hoodie_file_name"]
    assert records.drop_columns(records.column_names[:5]).to_pylist() == table.to_pylist()
    # each datum is exactly what fastavro reads with the header schema
    parsed = fastavro.parse_schema(json.loads(block.schema))
    first_len = struct.unpack(">i", block.content[8:12])[0]
    datum = fastavro.schemaless_reader(io.BytesIO(block.content[12:12 + first_len]), parsed, None)
    assert datum["price"] == Decimal("12345.67890") and datum["attrs"] == {"k": {"x": 1.5, "ok": True}}


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.none() | st.decimals(-10**9, 10**9, places=5, allow_nan=False, allow_infinity=False),
                          st.none() | st.decimals(-10**20, 10**20, places=0, allow_nan=False, allow_infinity=False)),
                max_size=20))
def test_fixed_decimals_are_vectorized_and_byte_equal_to_fastavro(values):
    arrow = pa.schema([("small", pa.decimal128(15, 5)), pa.field("big", pa.decimal128(38, 0), nullable=True)])
    table = pa.Table.from_pylist([{"small": a, "big": b} for a, b in values], schema=arrow)
    record = load_schema(table_avro_schema(arrow, "t"))
    plan = flat_plan(record, mixed=False)
    assert plan is not None and [f.kind for f in plan] == ["decimal", "decimal"]
    assert encode_flat(table, plan, length_prefix=True) == encode_fastavro(table, record, length_prefix=True)
    decoded = data_block_records(read_blocks(avro_data_block(table, json.dumps(record), T1), source="x")[0])
    assert decoded.to_pylist() == table.to_pylist()


def test_named_type_shared_by_two_fields_falls_back_to_whole_records():
    point = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": point}, {"name": "b", "type": ["null", "Point"]}, {"name": "s", "type": "string"}]}
    assert flat_plan(schema) is None
    rows = [{"a": {"x": 1}, "b": None, "s": "q"}, {"a": {"x": -2}, "b": {"x": 3}, "s": ""}]
    table = pa.Table.from_pylist(rows, schema=avro_to_arrow_schema(schema))
    decoded = data_block_records(read_blocks(avro_data_block(table, json.dumps(schema), T1), source="x")[0])
    assert decoded.to_pylist() == rows


def test_data_block_records_with_an_evolved_schema():
    old = pa.table({"k": ["a", "b"], "n": pa.array([1, None], pa.int32()), "gone": ["x", "y"]})
    block = read_blocks(avro_data_block(old, table_avro_schema(old.schema, "t"), T1), source="x")[0]
    wanted = pa.schema([("n", pa.int64()), ("added", pa.string()), ("k", pa.string())])
    out = data_block_records(block, wanted)
    assert out.schema == wanted
    assert out.to_pylist() == [{"n": 1, "added": None, "k": "a"}, {"n": None, "added": None, "k": "b"}]


def test_parquet_data_block_round_trip():
    table = pa.Table.from_pylist(NESTED_ROWS, schema=NESTED)
    schema = table_avro_schema(NESTED, "t", with_meta_fields=True)
    (block,) = read_blocks(parquet_data_block(table, schema, T1), source="x")
    assert block.block_type == BlockType.PARQUET_DATA_BLOCK
    assert (block.instant_time, block.schema) == (T1, schema)
    footer = pq.read_metadata(pa.BufferReader(block.content))
    assert footer.metadata[b"parquet.avro.schema"].decode() == schema
    assert footer.row_group(0).column(0).compression == "GZIP"
    records = data_block_records(block)
    assert records.schema == avro_to_arrow_schema(schema)
    assert records.drop_columns(records.column_names[:5]).to_pylist() == table.to_pylist()
    snappy = read_blocks(parquet_data_block(table, schema, T1, compression="snappy"), source="x")[0]
    assert data_block_records(snappy).equals(records)


def test_unsupported_avro_block_version_and_damaged_records():
    rows = pa.table({"k": ["a", "b"]})
    schema = table_avro_schema(rows.schema, "t")
    good = read_blocks(avro_data_block(rows, schema, T1), source="x")[0]
    old = encode_block(BlockType.AVRO_DATA_BLOCK, good.header, struct.pack(">i", 2) + good.content[4:])
    with pytest.raises(HudiUnsupportedError, match="content version 2"):
        data_block_records(read_blocks(old, source="x")[0])
    short = encode_block(BlockType.AVRO_DATA_BLOCK, good.header, good.content[:-1])
    with pytest.raises(HudiCorruptFileError):
        data_block_records(read_blocks(short, source="x")[0])
    wrong_schema = encode_block(BlockType.AVRO_DATA_BLOCK, {0: T1, 2: table_avro_schema(
        pa.schema([("k", pa.float64())]), "t")}, good.content)
    with pytest.raises(HudiCorruptFileError):
        data_block_records(read_blocks(wrong_schema, source="x")[0])
    datum = good.content[12:12 + struct.unpack(">i", good.content[8:12])[0]]
    bad_branch = struct.pack(">iii", 3, 1, len(datum)) + b"\x04" + datum[1:]
    with pytest.raises(HudiCorruptFileError, match="union branch"):
        data_block_records(read_blocks(encode_block(BlockType.AVRO_DATA_BLOCK, good.header, bad_branch), source="x")[0])
    left_over = struct.pack(">iii", 3, 1, len(datum) + 1) + datum + b"\x00"
    with pytest.raises(HudiCorruptFileError, match="bytes left"):
        data_block_records(read_blocks(encode_block(BlockType.AVRO_DATA_BLOCK, good.header, left_over), source="x")[0])
    (no_schema,) = read_blocks(encode_block(BlockType.AVRO_DATA_BLOCK, {0: T1}, good.content), source="x")
    with pytest.raises(HudiCorruptFileError, match="SCHEMA"):
        data_block_records(no_schema)


FUZZ_ROWS = pa.Table.from_pylist(NESTED_ROWS, schema=NESTED).append_column("s", pa.array(["a", None, "ü"]))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["flat", "nested", "delete"]), st.integers(0, 10**6), st.integers(1, 255))
def test_damaged_content_decodes_or_raises_corrupt_never_anything_else(shape, where, xor):
    if shape == "delete":
        block = read_blocks(delete_block(["a", "bb", "ccc"], ["p", "", None], T1), source="x")[0]
    else:
        rows = FUZZ_ROWS if shape == "nested" else FUZZ_ROWS.select(["id", "s", "when", "day"])
        block = read_blocks(avro_data_block(rows, table_avro_schema(rows.schema, "t"), T1), source="x")[0]
    pos = 8 + where % (len(block.content) - 8)  # keep the version/count words: those have their own tests
    content = block.content[:pos] + bytes([block.content[pos] ^ xor]) + block.content[pos + 1:]
    damaged = read_blocks(encode_block(block.block_type, block.header, content), source="x")[0]
    try:
        out = delete_block_records(damaged) if shape == "delete" else data_block_records(damaged)
    except HudiCorruptFileError:
        return
    assert out.num_rows == 3


# -- schema mapping ------------------------------------------------------------------------
def test_avro_to_arrow_schema_inverts_table_avro_schema():
    arrow = pa.schema([
        pa.field("s", pa.string(), nullable=False), ("b", pa.binary()), ("i", pa.int32()), ("l", pa.int64()),
        ("f", pa.float32()), ("d", pa.float64()), ("t", pa.bool_()), ("dec", pa.decimal128(20, 4)),
        ("day", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("lts", pa.timestamp("ms")),
        ("lst", pa.list_(pa.field("element", pa.int64()))),
        ("m", pa.map_(pa.string(), pa.field("value", pa.string()))),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.string())]))])),
    ])
    assert avro_to_arrow_schema(table_avro_schema(arrow, "t")) == arrow


def test_avro_to_arrow_schema_other_shapes():
    schema = {"type": "record", "name": "r", "namespace": "ns", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED"]}},
        {"name": "again", "type": ["Color", "null"]},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "bd", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}},
        {"name": "tm", "type": {"type": "long", "logicalType": "time-micros"}},
    ]}
    assert avro_to_arrow_schema(schema) == pa.schema([
        pa.field("e", pa.string(), nullable=False), ("again", pa.string()),
        pa.field("fx", pa.binary(4), nullable=False), pa.field("bd", pa.decimal256(40, 2), nullable=False),
        pa.field("tm", pa.time64("us"), nullable=False)])
    bad = {"type": "record", "name": "r", "fields": [{"name": "u", "type": ["null", "int", "string"]}]}
    with pytest.raises(HudiUnsupportedError, match="union"):
        avro_to_arrow_schema(bad)


# -- delete blocks -------------------------------------------------------------------------
HUDI_RS_DELETE_RECORD = {  # hudi-rs' reader union, as section 6.5 of the format reference describes it
    "type": "record", "name": "HoodieDeleteRecordList", "fields": [{"name": "deleteRecordList", "type": {
        "type": "array", "items": {"type": "record", "name": "HoodieDeleteRecord", "fields": [
            {"name": "recordKey", "type": ["null", "string"]},
            {"name": "partitionPath", "type": ["null", "string"]},
            {"name": "orderingVal", "type": [
                "null", "int", "long", "float", "double", "bytes", "string",
                {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
                {"type": "int", "logicalType": "date"}, {"type": "int", "logicalType": "time-millis"},
                {"type": "long", "logicalType": "time-micros"}, {"type": "long", "logicalType": "timestamp-millis"},
                {"type": "long", "logicalType": "timestamp-micros"}]}]}}}],
}


def test_delete_block_bytes_and_both_readers_unions():
    keys = ["k1", "ключ", "k" * 200]
    paths = ["p=1", "", "a/b"]
    (block,) = read_blocks(delete_block(keys, paths, T1), source="x")
    assert block.block_type == BlockType.DELETE_BLOCK and dict(block.header) == {HeaderKey.INSTANT_TIME: T1}
    version, length = struct.unpack(">ii", block.content[:8])
    payload = block.content[8:]
    assert version == 3 and length == len(payload)
    # one array block of 3 records (count 3 = zig-zag 06), then the terminating 0; every record ends in 04 00
    assert payload[0] == 6 and payload[-1] == 0
    pos = 1
    for key, path in zip(keys, paths):
        for text in (key, path):
            raw = text.encode()
            assert payload[pos] == 2  # union branch 1 (string)
            varint = fastavro_varint(len(raw))
            assert payload[pos + 1:pos + 1 + len(varint)] == varint
            pos += 1 + len(varint) + len(raw)
        assert payload[pos:pos + 2] == b"\x04\x00"
        pos += 2
    assert pos == len(payload) - 1
    rs = fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(HUDI_RS_DELETE_RECORD), None)
    assert [(r["recordKey"], r["partitionPath"], r["orderingVal"]) for r in rs["deleteRecordList"]] == [
        (k, p, 0) for k, p in zip(keys, paths)]
    ours = delete_block_records(block)
    assert ours.to_pylist() == [{"record_key": k, "partition_path": p, "ordering_is_default": True,
                                 "ordering_value": "0"} for k, p in zip(keys, paths)]


def fastavro_varint(n: int) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema({"type": "record", "name": "x", "fields": [
        {"name": "v", "type": "long"}]}), {"v": n})
    return buf.getvalue()


def test_empty_delete_block():
    (block,) = read_blocks(delete_block([], [], T1), source="x")
    assert block.content == struct.pack(">ii", 3, 1) + b"\x00"
    assert delete_block_records(block).num_rows == 0


def _wrapped_delete_payload(ordering: list) -> bytes:
    wrappers = [{"type": "record", "name": n, "fields": [{"name": "value", "type": t}]} for n, t in [
        ("BooleanWrapper", "boolean"), ("IntWrapper", "int"), ("LongWrapper", "long"), ("FloatWrapper", "float"),
        ("DoubleWrapper", "double"), ("BytesWrapper", "bytes"), ("StringWrapper", "string"),
        ("DateWrapper", "int")]]
    schema = fastavro.parse_schema({"type": "record", "name": "L", "fields": [{"name": "deleteRecordList", "type": {
        "type": "array", "items": {"type": "record", "name": "D", "fields": [
            {"name": "recordKey", "type": ["null", "string"]}, {"name": "partitionPath", "type": ["null", "string"]},
            {"name": "orderingVal", "type": ["null", *wrappers]}]}}}]})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {"deleteRecordList": [
        {"recordKey": f"k{i}", "partitionPath": "p", "orderingVal": o} for i, o in enumerate(ordering)]})
    return buf.getvalue()


def test_delete_ordering_values_of_other_writers():
    ordering = [None, ("IntWrapper", {"value": 0}), ("LongWrapper", {"value": 5}),
                ("DoubleWrapper", {"value": 0.0}), ("StringWrapper", {"value": "x"}),
                ("BooleanWrapper", {"value": False}), ("DateWrapper", {"value": 0})]
    payload = _wrapped_delete_payload(ordering)
    block = read_blocks(encode_block(BlockType.DELETE_BLOCK, {0: T1},
                                     struct.pack(">ii", 3, len(payload)) + payload), source="x")[0]
    out = delete_block_records(block)
    assert out.column("ordering_is_default").to_pylist() == [True, True, False, True, False, False, False]
    assert out.column("ordering_value").to_pylist() == [None, "0", "5", "0.0", "x", "False", "0"]


def test_kryo_and_damaged_delete_blocks_are_refused():
    for version in (1, 2):
        kryo = encode_block(BlockType.DELETE_BLOCK, {0: T1}, struct.pack(">ii", version, 3) + b"abc")
        with pytest.raises(HudiUnsupportedError, match="Kryo"):
            delete_block_records(read_blocks(kryo, source="x")[0])
    good = read_blocks(delete_block(["a", "b"], ["", ""], T1), source="x")[0].content
    for damaged in (good[:-1], good[:8] + b"\x7f" + good[9:], struct.pack(">ii", 3, len(good)) + good[8:]):
        with pytest.raises(HudiCorruptFileError):
            delete_block_records(read_blocks(encode_block(BlockType.DELETE_BLOCK, {0: T1}, damaged), source="x")[0])


def test_a_block_of_partial_records_is_read_as_partial_and_refused_where_hudi_cannot_merge_it(tmp_path):
    """Hudi 1.x partial updates write log blocks whose schema is the updated columns only, with the
    header IS_PARTIAL=true (``HoodieAppendHandle.getUpdatedHeader``, ``HeaderMetadataType.IS_PARTIAL``);
    a reader overlays those columns on the record before it (tests/test_partial_updates.py). The scan
    notes which columns the block holds; with a payload class (no ``partialMerge`` in Hudi) the
    merge is refused, naming the block."""
    from pyhudi.config.table import PARTIAL_UPDATE_PAYLOAD
    from pyhudi.read.merge import MergeSpec, Visibility, merge_slice, scan_logs

    rows = pa.table({"v": [1]})
    schema = table_avro_schema(rows.schema, "t", with_meta_fields=True)  # a partial block: meta fields + v
    rows = pa.table({"_hoodie_commit_time": [T1], "_hoodie_commit_seqno": ["s"], "_hoodie_record_key": ["a"],
                     "_hoodie_partition_path": [""], "_hoodie_file_name": ["f"], "v": [1]})
    content = struct.pack(">ii", 3, 1) + encode_flat(rows, flat_plan(load_schema(schema)), length_prefix=True)
    header = {HeaderKey.INSTANT_TIME: T1, HeaderKey.SCHEMA: schema, HeaderKey.IS_PARTIAL: "true"}
    log = ".f1-0_" + T1 + ".log.1_0-1-0"
    (tmp_path / log).write_bytes(encode_block(BlockType.AVRO_DATA_BLOCK, header, content))
    whole = {**header, HeaderKey.IS_PARTIAL: "false"}
    (tmp_path / (log + "x")).write_bytes(encode_block(BlockType.AVRO_DATA_BLOCK, whole, content))
    storage = Storage(str(tmp_path))
    seen = Visibility(frozenset({T1}))
    assert not scan_logs(storage, [log + "x"], rows.schema, seen).partial  # IS_PARTIAL=false: whole records
    wide = rows.schema.append(pa.field("w", pa.string()))
    scan = scan_logs(storage, [log], wide, seen)
    assert scan.partial[0].columns == (*rows.column_names,)
    stored = rows.append_column("w", pa.array(["kept"])).set_column(5, "v", pa.array([0]))
    merged, _ = merge_slice(stored, scan, wide, MergeSpec.of(None, None))
    assert merged.select(["_hoodie_record_key", "v", "w"]).to_pylist() == [
        {"_hoodie_record_key": "a", "v": 1, "w": "kept"}]
    with pytest.raises(HudiUnsupportedError, match=r"IS_PARTIAL=true.*PartialUpdateAvroPayload"):
        merge_slice(None, scan, wide, MergeSpec.of(None, PARTIAL_UPDATE_PAYLOAD))
