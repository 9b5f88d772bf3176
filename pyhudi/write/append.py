"""Hudi's append handle: merge-on-read updates and deletes written as log blocks (executor side).

A file group's changes go to the current log file of its latest slice: one data block with the
new record versions (meta columns filled as for a base file) and one delete block with the keys
deleted. The handle appends to the slice's current log file while it is smaller than
``hoodie.logfile.max.size`` and ends in a complete block; otherwise (or where the storage cannot
append) it starts the next log version. A crash mid-append leaves a truncated block at the end,
which readers skip and writers never append after.

Blocks carry their instant: until that instant completes on the timeline, readers ignore them,
so appending never exposes a half-done write.

From table version 8 (``LogTarget.per_instant``) Hudi never appends: each delta commit writes a new
log file named with its own instant, version 1, with the task's write token (Hudi 1.x's
``HoodieAppendHandle``), and readers place it in a slice by the delta commit's completion time. Its
write stat then names only that file: ``prevCommit`` is the delta commit itself and ``baseFile`` is
empty, as Hudi 1.x records them (the log is not tied to a base file by name any more) -- except on
a CDC table, where Hudi names the latest slice's base instant, base file and log files in every
delta write stat ("the cdc reader needs the base file metadata", ``HoodieAppendHandle.init``). The
append handle writes no change data file: CDC readers infer a log file's changes (LOG_FILE).
"""

from __future__ import annotations

import dataclasses
import posixpath
import time

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiFileExistsError
from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.io.file_names import log_file_name, parse_log_file, relative_path
from pyhudi.io.log_format import (
    avro_data_block,
    delete_block,
    has_valid_tail,
    parquet_data_block,
)
from pyhudi.metadata import column_stats
from pyhudi.storage import Storage
from pyhudi.write.columns import IS_DELETE
from pyhudi.write.markers import APPEND, create_marker, delete_marker
from pyhudi.write.plan import LogTarget, WriteBucket, WriteContext
from pyhudi.write.rows import stats_row, to_storage_rows
from pyhudi.write.task import TaskInfo


def _choose_file(storage: Storage, ctx: WriteContext, bucket: WriteBucket, target: LogTarget,
                 token: str) -> tuple[str, bool]:
    """(relative path of the log file to write, whether it is appended to)."""
    if target.per_instant:  # version 8+: the delta commit's own file, never an older one
        name = log_file_name(bucket.file_id_prefix, ctx.instant_time, 1, token)
        return relative_path(bucket.partition_path, name), False
    current = target.current
    if current is not None and target.current_size < ctx.log_max_size and storage.can_append \
            and ctx.append_in_place and has_valid_tail(storage, current):
        return current, True
    name = log_file_name(bucket.file_id_prefix, target.base_instant, target.next_version, token)
    return relative_path(bucket.partition_path, name), False


def _create_log_file(storage: Storage, ctx: WriteContext, rel: str, payload: bytes, token: str) -> str:
    """Create a new log file exclusively, taking the next version while another writer holds the name."""
    folder, name = posixpath.split(rel)
    parsed = parse_log_file(name)
    assert parsed is not None
    while True:
        create_marker(storage, ctx.instant_time, rel, APPEND)
        try:
            storage.create_new(rel, payload)
            return rel
        except HudiFileExistsError:  # another writer's file: the marker must not name it
            delete_marker(storage, ctx.instant_time, rel, APPEND)
            parsed = dataclasses.replace(parsed, version=parsed.version + 1)
            rel = relative_path(folder, log_file_name(parsed.file_id, parsed.base_instant, parsed.version,
                                                      token))


def _data_blocks(ctx: WriteContext, records: pa.Table) -> list[bytes]:
    """The records as data blocks of about ``hoodie.logfile.data.block.max.size`` bytes at most
    (``HoodieAppendHandle`` flushes a block once its records' estimated size reaches it): encoded
    whole first, and cut into equal runs of records where that is too large."""
    # partial updates (Hudi 1.x HoodieAppendHandle with hoodie.write.partial.update.schema): the
    # block's writer schema is the partial one and its header says IS_PARTIAL=true
    partial = ctx.partial_update_schema is not None
    writer_schema = ctx.partial_update_schema or ctx.settings.avro_schema

    def encode(rows: pa.Table) -> bytes:
        if ctx.log_block_format == "parquet":
            return parquet_data_block(rows, writer_schema, ctx.instant_time, compression=ctx.settings.codec,
                                      dictionary=ctx.settings.dictionary, partial=partial)
        return avro_data_block(rows, writer_schema, ctx.instant_time, partial=partial)

    whole = encode(records)
    pieces = min(records.num_rows, -(-len(whole) // ctx.log_block_max_size))
    if pieces <= 1:
        return [whole]
    step = -(-records.num_rows // pieces)
    return [encode(records.slice(start, step)) for start in range(0, records.num_rows, step)]


def append_handle(storage: Storage, ctx: WriteContext, schema: pa.Schema, bucket: WriteBucket,
                  rows: pa.Table, task: TaskInfo, *, first_position: int = 0) -> dict | None:
    """Write ``rows`` (already combined) as log blocks of the bucket's file group."""
    started = time.monotonic()
    target = bucket.log
    assert target is not None
    token = task.token
    is_delete = rows.column(IS_DELETE)
    live = rows.filter(pc.invert(is_delete))
    gone = rows.filter(is_delete)
    if live.num_rows == 0 and gone.num_rows == 0:
        return None
    rel, appending = _choose_file(storage, ctx, bucket, target, token)
    name = posixpath.basename(rel)
    blocks = []
    if live.num_rows:
        records = to_storage_rows(live, schema, ctx, bucket.file_id_prefix, task, first_position)
        blocks += _data_blocks(ctx, records)
    if gone.num_rows:
        blocks.append(delete_block(gone.column(RECORD_KEY).combine_chunks(),
                                   gone.column(PARTITION_PATH).combine_chunks(), ctx.instant_time,
                                   avro_schema=ctx.settings.avro_schema))
    payload = b"".join(blocks)
    offset = target.current_size if appending else 0
    if appending:
        create_marker(storage, ctx.instant_time, rel, APPEND)
        with storage.open_append(rel) as out:
            out.write(payload)
    else:
        rel = _create_log_file(storage, ctx, rel, payload, token)
        name = posixpath.basename(rel)
    cdc = ctx.cdc_mode is not None
    log_files = [] if target.per_instant and not cdc else list(target.log_files)
    if name not in log_files:
        log_files.append(name)
    parsed = parse_log_file(name)
    assert parsed is not None
    prev_commit = ctx.instant_time if target.per_instant else bucket.prev_commit
    if cdc:  # HoodieAppendHandle.init on a CDC table: the stat names the slice the log extends, for CDC readers
        prev_commit = target.base_instant
    stats = stats_row(bucket.partition_path, bucket.file_id_prefix, rel, prev_commit=prev_commit,
                      io_type=APPEND, num_writes=live.num_rows, deletes=gone.num_rows, updates=live.num_rows,
                      inserts=0, file_size=offset + len(payload), started=started, min_key=None, max_key=None)
    stats.update(write_bytes=len(payload), log_version=parsed.version, log_offset=offset,
                 base_file="" if target.per_instant and not cdc else target.base_file_name,
                 log_files="\n".join(log_files), log_blocks=len(blocks))
    if ctx.log_column_stats and live.num_rows:
        stats["column_stats"] = column_stats.encode(column_stats.table_records(
            bucket.partition_path, name, records, columns=ctx.stats_columns or None))
    return stats
