"""Building the ``record_index`` partition of the metadata table in this process.

A restore, or a rollback run without Spark, rebuilds the metadata table from storage; its record
index is then built here from every live key of the table (:func:`build_locally`), and a check
compares the partition with what storage holds (:func:`live_locations`). It reads the data table
(a :class:`~pyhudi.table.table.HudiTable`, its file system view) and writes the metadata table, so
it stands in the commit package; :mod:`pyhudi.spark.record_index_job` builds the same files in
executors.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from pyhudi.commit.metadata_writer import MetadataWriter
from pyhudi.metadata.keys import file_group_id
from pyhudi.metadata.record_index import (
    FILE_GROUP_PREFIX,
    GROUP,
    PARTITION,
    Sizing,
    cells,
    empty_locations,
    instant_millis,
    slice_locations,
    with_groups,
)
from pyhudi.read.merge import MergeSpec, key_columns
from pyhudi.table.fs_view import FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import WriteStat


def write_groups(mdt: MetadataWriter, instant: str, located: pa.Table, count: int, *,
                 instant_ms: int) -> list[WriteStat]:
    """Base files of every file group (0..count-1) at ``instant`` from located keys with their
    group (:func:`with_groups`): all groups get one, empty or not, as Hudi initializes them."""
    stats = []
    groups = located.column(GROUP).to_numpy() if located.num_rows else np.zeros(0, dtype=np.int32)
    for g in range(count):
        part = located.filter(pa.array(groups == g)) if located.num_rows else located
        stats.append(mdt.write_base_cells(instant, PARTITION, file_group_id(FILE_GROUP_PREFIX, g),
                                          cells(part, instant_ms, schema=mdt.record_schema)))
    return stats


def live_locations(table: HudiTable) -> pa.Table:
    """Every live key of the table located in its file slice, read in this process (storage
    listed, not the metadata table: this is what the record index is checked against)."""
    view = FileSystemView(table.storage, table.timeline.reload())
    schema = table.arrow_schema()
    if schema is None:
        return empty_locations()
    spec = MergeSpec.of(table.config.precombine_field, table.config.payload_class)
    key_schema = key_columns(schema, spec)
    visibility = view.visibility()
    parts = []
    for s in view.latest_slices():
        parts.append(slice_locations(table.storage, s.to_read(), key_schema, spec, visibility))
    return pa.concat_tables(parts) if parts else empty_locations()


def build_locally(table: HudiTable, sizing: Sizing) -> Callable[[str], list[WriteStat]]:
    """A builder of the partition that reads every live key of the table in this process (the
    record index of a table rebuilt by a restore or a rollback run without Spark)."""
    def build(instant: str) -> list[WriteStat]:
        located = live_locations(table)
        count = sizing.groups(located.num_rows)
        return write_groups(MetadataWriter(table.storage), instant, with_groups(located, count), count,
                            instant_ms=instant_millis(instant[:17], utc=table.config.utc_timeline))
    return build
