"""Compacting one planned file slice into a new base file (the work of one task)."""

from __future__ import annotations

import time

import pyarrow as pa

from pyhudi.io.avro_schema import FILE_NAME
from pyhudi.io.base_file import ParquetSettings, align, read_base_file, write_base_file
from pyhudi.io.file_names import base_file_name, relative_path
from pyhudi.plans.compaction import CompactionOperation
from pyhudi.read.merge import MergeSpec, Visibility, read_slice
from pyhudi.storage import Storage
from pyhudi.write.cdc import encode_cdc_stats, slice_changes, write_cdc_file
from pyhudi.write.markers import MERGE, create_marker
from pyhudi.write.plan import LOG_BLOCK_MAX_SIZE, LOG_MAX_SIZE
from pyhudi.write.rows import stats_row


def compact_slice(storage: Storage, op: CompactionOperation, schema: pa.Schema, settings: ParquetSettings,
                  spec: MergeSpec, visibility: Visibility, instant: str, token: str, *,
                  cdc_mode: str | None = None, log_max_size: int = LOG_MAX_SIZE,
                  log_block_max_size: int = LOG_BLOCK_MAX_SIZE) -> dict:
    """Executor side of a compaction: one planned slice merged into the base file of ``instant``.

    Records keep their commit time and sequence number (they were written by earlier instants);
    only ``_hoodie_file_name`` names the new file. ``cdc_mode``: also write the slice's changes
    into change data files (a CDC table whose index writes inserts to logs:
    ``HoodieMergeHandleFactory.create`` for the compactor, ``isYieldingPureLogForMor``), in blocks
    of ``log_block_max_size`` rolled over at ``log_max_size`` (:func:`pyhudi.write.cdc.write_cdc_file`).
    """
    started = time.monotonic()
    merged, counts, scan = read_slice(storage, op.to_read(), schema, spec, visibility)
    name = base_file_name(op.file_id, token, instant)
    rel = relative_path(op.partition_path, name)
    if settings.populate_meta_fields or FILE_NAME in merged.column_names:
        at = merged.schema.get_field_index(FILE_NAME)
        merged = merged.set_column(at, FILE_NAME, pa.repeat(pa.scalar(name, pa.string()), merged.num_rows))
    create_marker(storage, instant, rel, MERGE)
    written = write_base_file(storage, rel, merged, settings)
    row = stats_row(op.partition_path, op.file_id, rel, prev_commit=op.base_instant, io_type=MERGE,
                    num_writes=written.num_rows, deletes=counts.deleted, updates=counts.updated,
                    inserts=max(0, counts.output_records - counts.base_records + counts.deleted),
                    file_size=written.size, started=started, min_key=written.min_key, max_key=written.max_key)
    if cdc_mode is not None:
        before = align(read_base_file(storage, relative_path(op.partition_path, op.base_file)), merged.schema) \
            if op.base_file else None
        row["cdc_stats"] = encode_cdc_stats(write_cdc_file(
            storage, slice_changes(before, merged), partition=op.partition_path, file_id=op.file_id, instant=instant,
            token=token, mode=cdc_mode, writer_schema=settings.avro_schema, max_file_size=log_max_size,
            max_block_size=log_block_max_size))
    row.update(log_records=scan.log_records, log_files_compacted=len(op.log_files), log_size_compacted=scan.log_bytes,
               updated_compacted=counts.updated, rollback_blocks=scan.rollback_blocks,
               corrupt_blocks=scan.corrupt_blocks, log_blocks=scan.blocks)
    return row
