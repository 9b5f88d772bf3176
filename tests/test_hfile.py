"""HFile reading and writing (pyhudi/io/hfile.py): HBase-written files and round trips."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyhudi.errors import HudiCorruptFileError
from pyhudi.io.hfile import CHECKSUM_CRC32, HFileReader, crc32c, write_hfile

DATA = Path(__file__).parent / "data" / "hfile"


def _read(name: str) -> HFileReader:
    return HFileReader((DATA / name).read_bytes(), source=name, verify=True)


@pytest.mark.parametrize(("name", "count", "suffix"), [
    ("hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile", 20000, ""),
    ("hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile", 5000, ""),
    ("hudi_1_0_hbase_2_4_13_16KB_GZ_20000_fake_first_key.hfile", 20000, "-abcdefghij"),
])
def test_reads_every_cell_hbase_wrote(name, count, suffix):
    reader = _read(name)
    assert reader.entry_count == count
    cells = list(reader.items())
    assert cells == [(f"hudi-key-{i:09d}{suffix}".encode(), f"hudi-value-{i:09d}".encode()) for i in range(count)]
    assert reader.file_info["hudi_hfile_testing.custom_key"] == b"hudi_custom_value"
    assert reader.meta_block("bloomFilter") is not None and reader.meta_block("nothing") is None
    for i in (0, 1, count // 3, count - 1):  # point lookups through the block index
        assert reader.get(f"hudi-key-{i:09d}{suffix}".encode()) == f"hudi-value-{i:09d}".encode()
    assert reader.get(b"hudi-key-") is None and reader.get(b"zzz") is None and reader.get(b"a") is None
    some = [f"hudi-key-{i:09d}{suffix}".encode() for i in (count - 1, 0, 7, 8, count // 2)]
    assert reader.get_many([*some, b"a", b"hudi-key-", b"zzz", some[0]]) == \
        {row: row.replace(b"key", b"value").removesuffix(suffix.encode()) for row in some}
    assert [k for k, _ in reader.prefix(b"hudi-key-00000012")] == \
        [f"hudi-key-{i:09d}{suffix}".encode() for i in range(120, 130)]


def test_reads_a_three_level_index():
    reader = _read("hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile")
    assert reader.trailer.index_levels == 3
    key = "hudi-key-" + "a" * 100 + "-{:09d}"
    assert [k for k, _ in reader.items()] == [key.format(i).encode() for i in range(10000)]
    for i in range(0, 10000, 997):
        assert reader.get(key.format(i).encode()) == f"hudi-value-{i:09d}".encode()


def test_duplicate_rows_are_all_found_in_order():
    reader = _read("hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile")
    assert reader.entry_count == 4200
    values = list(reader.get_all(b"hudi-key-000000005"))
    assert values == [b"hudi-value-000000005"] + [f"hudi-value-000000005_{j}".encode() for j in range(20)]
    assert reader.get(b"hudi-key-000000199") == b"hudi-value-000000199"
    assert reader.get_many([b"hudi-key-000000005", b"hudi-key-000000006"]) == {
        b"hudi-key-000000005": b"hudi-value-000000005", b"hudi-key-000000006": b"hudi-value-000000006"}


def test_reads_an_empty_file_and_hudis_file_info():
    reader = _read("hudi_1_0_hbase_2_4_9_no_entry.hfile")
    assert reader.entry_count == 0 and list(reader.items()) == [] and reader.get(b"x") is None
    assert reader.trailer.comparator == "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
    assert {"minRecordKey", "maxRecordKey", "bloomFilterTypeCode"} <= set(reader.file_info)


def test_reads_a_metadata_table_file_hudis_own_writer_wrote():
    """Hudi 1.x writes HFiles without HBase: no checksums, its own file info, Avro records as values."""
    reader = _read("hudi_1_1_mdt_files-0000-0_13-170-402_20260307162449278.hfile")
    assert [k for k, _ in reader.items()] == [b"__all_partitions__", b"region=apac", b"region=eu", b"region=us"]
    assert reader.file_info["minRecordKey"] == b"__all_partitions__"
    assert reader.file_info["maxRecordKey"] == b"region=us"
    assert reader.file_info["schema"].startswith(b'{"type":"record","name":"HoodieMetadataRecord"')
    assert reader.meta_block("bloomFilter") is not None
    value = reader.get(b"region=apac")
    assert value is not None and b"07838327-b037-4532-a9df-3c5b05dd823d-0_2-27-57_20260307162434124.parquet" in value


def test_damaged_files_are_reported():
    data = bytearray((DATA / "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile").read_bytes())
    with pytest.raises(HudiCorruptFileError, match="not an HFile"):
        HFileReader(bytes(data[:-10]), source="cut")
    data[100] ^= 0xFF  # inside the first data block
    reader = HFileReader(bytes(data), source="flipped", verify=True)
    with pytest.raises(HudiCorruptFileError, match="checksum mismatch"):
        list(reader.items())


def test_crc32c_known_value():
    assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C


_rows = st.lists(st.binary(min_size=1, max_size=40), unique=True, max_size=300).map(sorted)


@settings(max_examples=60, deadline=None)
@given(rows=_rows, values=st.lists(st.binary(max_size=200), min_size=300, max_size=300),
       block_size=st.sampled_from([64, 1024, 1 << 20]), codec=st.sampled_from(["GZ", "NONE"]),
       crc=st.booleans())
def test_written_files_read_back_to_the_same_cells(rows, values, block_size, codec, crc):
    cells = list(zip(rows, values, strict=False))
    data = write_hfile(cells, block_size=block_size, codec=codec, file_info={"schema": b'{"type":"record"}'},
                       meta_blocks={"bloomFilter": b"\x00\x01"}, **({"checksum": CHECKSUM_CRC32} if crc else {}))
    reader = HFileReader(data, verify=True)
    assert list(reader.items()) == cells and reader.entry_count == len(cells)
    assert reader.file_info["schema"] == b'{"type":"record"}' and reader.meta_block("bloomFilter") == b"\x00\x01"
    for row, value in cells[::7]:
        assert reader.get(row) == value
    wanted = [r for r, _ in cells[::3]] + [r + b"\x00" for r, _ in cells[1::5]] + [b"", b"\xff" * 41]
    assert reader.get_many(wanted) == {r: v for r, v in cells if r in set(wanted)}
    if cells:
        prefix = cells[len(cells) // 2][0][:1]
        assert [r for r, _ in reader.prefix(prefix)] == [r for r, _ in cells if r.startswith(prefix)]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.binary(min_size=6, max_size=6), unique=True, min_size=1, max_size=400).map(sorted),
       value_size=st.integers(0, 30), block_size=st.sampled_from([64, 1024, 1 << 20]),
       repeat=st.booleans())
def test_lookups_in_blocks_of_cells_of_one_shape(rows, value_size, block_size, repeat):
    """Rows of one length and values of one length (a record index's blocks) are looked up by
    binary search; rows with NUL bytes (inside or trailing) and repeated rows read as any."""
    cells = [(r, (r * 10)[:value_size]) for r in rows]
    if repeat:  # a row twice: its first cell answers
        cells = sorted(cells + [(rows[0], b"\xee" * value_size)], key=lambda c: c[0])
        first = {}
        for r, v in cells:
            first.setdefault(r, v)
    else:
        first = dict(cells)
    reader = HFileReader(write_hfile(cells, block_size=block_size, codec="NONE"))
    wanted = rows[::2] + [r[:-1] + b"\x00" for r in rows[1::3]] + [b"\x00" * 6, b"\xff" * 6, b"short"]
    assert reader.get_many(wanted) == {r: first[r] for r in set(wanted) if r in first}


def test_writer_refuses_unsorted_rows():
    with pytest.raises(ValueError, match="ascending"):
        write_hfile([(b"b", b""), (b"a", b"")])


def test_blocks_are_cut_as_hudi_cuts_them():
    """A cell that would overflow the block starts the next one, a cell larger than a block gets
    one of its own, and cells of one row never span two blocks."""
    cells = [(b"a", b"1" * 10), (b"b", b"2"), (b"b", b"3"), (b"c", b"4" * 100), (b"d", b"5")]
    reader = HFileReader(write_hfile(cells, block_size=40, codec="NONE"))
    assert reader.trailer.data_index_count == 4  # [a] [b b] [c] [d]
    assert list(reader.get_all(b"b")) == [b"2", b"3"] and list(reader.items()) == cells
    assert reader.file_info["hfile.LASTKEY"] == b"\x00\x01d"


@pytest.mark.parametrize("last_key", [b"\x00\x09hudi", b"\x00\x01a", b"x", b""])
def test_a_last_key_the_file_cannot_end_with_is_not_trusted(last_key):
    """``hfile.LASTKEY`` cut short, below the file's rows, or missing: lookups read the blocks."""
    cells = [(f"k{i:03d}".encode(), b"v") for i in range(50)]
    reader = HFileReader(write_hfile(cells, block_size=64, file_info={"hfile.LASTKEY": last_key}))
    assert reader.get_many([b"k000", b"k049", b"k050"]) == {b"k000": b"v", b"k049": b"v"}
