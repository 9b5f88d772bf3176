"""The metadata table's column-stats keys and records, against those Apache Hudi 1.1 wrote."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from pyhudi.io.java_hash import java_string_hash
from pyhudi.metadata import column_stats
from pyhudi.metadata.files import read_partition
from pyhudi.metadata.keys import (
    bloom_filter_key,
    column_stats_key,
    file_group_index,
    partition_id,
)
from pyhudi.table.table import HudiTable


def _records(path: Path, partition: str):
    table, mdt = HudiTable(str(path)), HudiTable(str(path / ".hoodie" / "metadata"))
    return read_partition(table.storage, partition,
                          mdt_completed={i.timestamp: i.completion_time for i in mdt.timeline.completed()},
                          data_completed={i.timestamp for i in table.timeline.completed()})


def test_keys_and_hashes_are_hudis():
    # values Apache Hudi computes (XXH64 with seed 0xdabadaba as a long, MD5, Base64)
    assert column_stats_key("fare", "city=san_francisco", "x")[:24] == "k6A0EIIbKbU=8L2cgj6DtVM="
    assert partition_id("") == partition_id(".") == "FXThHwelITM="
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert file_group_index("polygenelubricants", 3) == 2 ** 31 % 3
    assert len(bloom_filter_key("p", "f.parquet")) == 36


def test_every_column_stats_key_hudi_wrote_is_reproduced(v9_table):
    """Each cell's key is the hash of its column, partition and file, in the file group Java's
    String.hashCode picks among the partition's two."""
    folder = v9_table / ".hoodie" / "metadata" / "column_stats"
    from pyhudi.io.hfile import HFileReader
    from pyhudi.metadata.files import decode_records

    partitions = ["region=apac", "region=eu", "region=us"]
    checked = 0
    for base in sorted(folder.glob("*.hfile")):
        group = int(base.name.split("-")[2])
        for key, record in decode_records(HFileReader(base.read_bytes()), None):
            stats = record["ColumnStatsMetadata"]
            assert key in {column_stats_key(stats["columnName"], p, stats["fileName"]) for p in partitions}
            assert file_group_index(key, 2) == group
            checked += 1
    assert checked > 100


def test_footer_statistics_equal_hudis(v9_table):
    """For every live base file and column Hudi indexed, the statistics pyhudi takes from the
    footer (value count, null count, sizes, and min/max read back in the column's type) equal the
    ones in Hudi's column_stats partition."""
    table = HudiTable(str(v9_table))
    schema = table.arrow_schema()
    assert schema is not None
    hudi = column_stats.file_ranges(_records(v9_table, column_stats.PARTITION), schema)
    raw = {}
    for _key, record in _records(v9_table, column_stats.PARTITION):
        stats = record["ColumnStatsMetadata"]
        raw[(stats["fileName"], stats["columnName"])] = stats
    compared = 0
    for base in table.file_system_view().latest_base_files():
        meta = pq.read_metadata(v9_table / base.path)
        mine_records = column_stats.footer_records(base.partition_path, base.name, meta)
        mine = column_stats.file_ranges(mine_records, schema)[base.name]
        for column, theirs in hudi.get(base.name, {}).items():
            ours = mine[column]
            assert (ours.min, ours.max, ours.null_count, ours.count) == \
                   (theirs.min, theirs.max, theirs.null_count, theirs.count), (base.name, column)
            mine_stats = next(r["ColumnStatsMetadata"] for _k, r in mine_records
                              if r["ColumnStatsMetadata"]["columnName"] == column)
            their_stats = raw[(base.name, column)]
            assert (mine_stats["totalSize"], mine_stats["totalUncompressedSize"]) == \
                   (their_stats["totalSize"], their_stats["totalUncompressedSize"]), (base.name, column)
            compared += 1
    assert compared > 50


def test_records_encode_with_the_version_6_schema():
    """Footer records of every wrapped type encode with the v6 schema and decode back."""
    import datetime as dt
    import io
    from decimal import Decimal

    import pyarrow as pa

    from pyhudi.metadata.files import _parsed_schema, encode_records
    from pyhudi.metadata.schema import RECORD_SCHEMA

    data = pa.table({"s": ["b", "a"], "i": pa.array([1, 2], pa.int32()), "l": [3, 4], "d": [0.5, 1.5],
                     "b": [True, False], "day": [dt.date(2024, 1, 2), dt.date(2024, 1, 1)],
                     "ts": pa.array([1, 2], pa.timestamp("us", tz="UTC")),
                     "dec": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(10, 2))})
    sink = io.BytesIO()
    pq.write_table(data, sink)
    meta = pq.read_metadata(io.BytesIO(sink.getvalue()))
    records = column_stats.footer_records("p", "f.parquet", meta)
    cells = encode_records(records, RECORD_SCHEMA)
    import fastavro

    decoded = [fastavro.schemaless_reader(io.BytesIO(v), _parsed_schema(RECORD_SCHEMA), return_record_name=True,
                                          return_record_name_override=True) for _k, v in cells]
    ranges = column_stats.file_ranges([(r["key"], r) for r in decoded], data.schema)["f.parquet"]
    assert (ranges["s"].min, ranges["s"].max) == ("a", "b")
    assert (ranges["day"].min, ranges["day"].max) == (dt.date(2024, 1, 1), dt.date(2024, 1, 2))
    assert (ranges["dec"].min, ranges["dec"].max) == (Decimal("-3.50"), Decimal("1.25"))
    assert ranges["ts"].max == dt.datetime(1970, 1, 1, 0, 0, 0, 2, tzinfo=dt.timezone.utc)
    assert ranges["i"].count == 2 and ranges["b"].null_count == 0


def test_the_statistics_of_some_columns_are_looked_up_by_key_prefix(v9_table):
    """Reading the statistics of chosen columns through the HFile block index gives exactly the
    records of those columns that a full read gives."""
    from pyhudi.metadata.keys import column_id

    table, mdt = HudiTable(str(v9_table)), HudiTable(str(v9_table / ".hoodie" / "metadata"))
    done = {i.timestamp: i.completion_time for i in mdt.timeline.completed()}
    everything = read_partition(table.storage, column_stats.PARTITION, mdt_completed=done)
    wanted = column_stats.key_prefixes(["txn_id", "amount"])
    some = read_partition(table.storage, column_stats.PARTITION, mdt_completed=done, key_prefixes=wanted)
    assert some == [(k, r) for k, r in everything if k.startswith(wanted)]
    assert {r["ColumnStatsMetadata"]["columnName"] for _k, r in some} == {"txn_id", "amount"}
    assert wanted == tuple(sorted({column_id("txn_id"), column_id("amount")}))


def test_decimal_bounds_cut_to_15_places_still_hold_every_value():
    from decimal import Decimal

    import pyarrow as pa

    from pyhudi.metadata.column_stats import _wrap

    kind = pa.decimal128(20, 18)
    assert _wrap(Decimal("1.000000000000000600"), kind)[1]["value"] == Decimal("1.000000000000000")
    assert _wrap(Decimal("1.000000000000000400"), kind, upper=True)[1]["value"] == Decimal("1.000000000000001")
