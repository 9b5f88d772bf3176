"""The metadata table's ``files`` partition, read from a table Apache Hudi 1.1 wrote."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from pyhudi.metadata.files import read_files_partition
from pyhudi.table.table import HudiTable

DATA = Path(__file__).parent / "data" / "mdt"


@pytest.fixture(scope="module")
def v9_table(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("mdt")
    with zipfile.ZipFile(DATA / "v9_txns_simple_meta.zip") as z:
        z.extractall(dest)
    return dest / "v9_txns_simple_meta"


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
