"""Change data of a merge (Hudi's ``HoodieMergeHandleWithChangeLog``), written by executors.

A write that rewrites a file group of a CDC table (copy-on-write upserts and deletes, inserts into
a small file group, a merge-on-read small file group rewritten) logs what it changed, record by
record, into a change data file beside the new base file (:mod:`pyhudi.io.cdc` has the format):

* ``u`` for a stored record the incoming one replaced (before: the stored record, after: the one
  written), ``d`` for one an incoming delete removed (before only), ``i`` for an incoming record
  with no stored one (after only) -- ``HoodieMergeHandleWithChangeLog.writeUpdateRecord`` /
  ``writeInsertRecord`` via ``HoodieCDCLogger.put``;
* nothing for stored records no incoming record touched, nor for those the incoming record lost
  to (a larger stored ordering value: ``HoodieMergeHandle.writeUpdateRecord`` returns false and
  the change-log handle logs nothing), nor for deletes of keys the file group does not hold.

Hudi skips the file when the merge kept no stored record and updated none
(``HoodieMergeHandleWithChangeLog.close``: "all the data from the previous file slice are deleted
... [or] all the incoming data is INSERT") and leaves the change to its reader's inference from
the base files (``HoodieCDCExtractor.parseWriteStat``: BASE_FILE_DELETE / BASE_FILE_INSERT). That
inference loses the deletes when such a merge also inserted records (the new base file then reads
as all inserts), and fails ("There should be a cdc log file") for an upsert that deleted every
record of the group. pyhudi writes the file in those cases too: Hudi's reader then takes the
changes as they are (AS_IS), which is right in every case. New file groups (create handle) and
merge-on-read log appends write none, as in Hudi: their changes are inferred from the new base
file (BASE_FILE_INSERT) and the log file (LOG_FILE) by the reader.

The changes go in blocks of ``hoodie.logfile.data.block.max.size``, and the file rolls over to the
next log version past ``hoodie.logfile.max.size`` (:func:`write_cdc_file`). Each file is created
with a CREATE marker naming it (``HoodieWriteHandle.getLogCreationCallback``), so a failed write's
rollback deletes it with the base file; the path and size of every file go into the write stat's
``cdcStats`` (``HoodieCDCLogger.getCDCWriteStats``: partition-relative path -> bytes).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiFileExistsError
from pyhudi.io.avro_schema import COMMIT_TIME, META_FIELDS, RECORD_KEY
from pyhudi.io.cdc import DELETE, INSERT, UPDATE, Changes, LoggingMode, cdc_blocks, cdc_file_name
from pyhudi.io.file_names import relative_path
from pyhudi.storage import Storage
from pyhudi.write.markers import CREATE, create_marker
from pyhudi.write.plan import LOG_BLOCK_MAX_SIZE, LOG_MAX_SIZE, WriteBucket, WriteContext
from pyhudi.write.task import TaskInfo


def merge_changes(before: pa.Table, updated: np.ndarray, deleted: np.ndarray, after: pa.Table,
                  after_of_updated: np.ndarray, inserted: np.ndarray) -> Changes:
    """The change records of one merge, from what the merge decided.

    ``before``: the stored rows; ``updated`` / ``deleted``: masks over them (replaced by an
    incoming record / removed by an incoming delete). ``after``: the rows written;
    ``after_of_updated``: for each updated stored row (in stored order), its row in ``after``;
    ``inserted``: rows of ``after`` that are new records. Changes come in stored order (updates
    and deletes), then the inserts.
    """
    changed = np.flatnonzero(updated | deleted)
    is_update = updated[changed]
    n_old, n_ins = len(changed), len(inserted)
    after_rows = np.full(n_old + n_ins, -1, dtype=np.int64)
    after_rows[:n_old][is_update] = after_of_updated
    after_rows[n_old:] = inserted
    after_valid = after_rows >= 0
    before_rows = np.concatenate([changed, np.full(n_ins, -1, dtype=np.int64)])
    before_valid = before_rows >= 0
    op = np.concatenate([np.where(is_update, UPDATE, DELETE), np.full(n_ins, INSERT)]).astype(object)
    before_img = _images(before, before_rows, before_valid)
    after_img = _images(after, after_rows, after_valid)
    n = len(op)
    key_before = before.column(RECORD_KEY).take(pa.array(np.where(before_valid, before_rows, 0))) \
        if before.num_rows else pa.nulls(n, pa.string())
    key_after = after.column(RECORD_KEY).take(pa.array(np.where(after_valid, after_rows, 0))) \
        if after.num_rows else pa.nulls(n, pa.string())
    record_key = pc.if_else(pa.array(before_valid), key_before, key_after)
    if isinstance(record_key, pa.ChunkedArray):
        record_key = record_key.combine_chunks()
    return Changes(pa.array(op, pa.string()), record_key, before_img, before_valid, after_img, after_valid)


def _images(rows: pa.Table, index: np.ndarray, valid: np.ndarray) -> pa.Table:
    """Rows ``index`` of ``rows`` without meta columns (row 0 stands in where not ``valid``)."""
    data = rows.select([c for c in rows.column_names if c not in META_FIELDS])
    if rows.num_rows == 0:
        return data.slice(0, 0) if not len(index) else \
            pa.table({c: pa.nulls(len(index), data.schema.field(c).type) for c in data.column_names})
    return data.take(pa.array(np.where(valid, index, 0)))


def log_merge(storage: Storage, ctx: WriteContext, bucket: WriteBucket, task: TaskInfo, *, before: pa.Table,
              after: pa.Table, replaced: pa.Array | pa.ChunkedArray, dropped: pa.Array | pa.ChunkedArray,
              first_insert: int) -> str | None:
    """The merge handle's change log: the change data file of what it decided, and its ``cdcStats``
    (encoded for the stats row).

    ``before``: the stored rows; ``replaced`` / ``dropped``: masks over them (an incoming record
    replaced the row / an incoming delete removed it); ``after``: the rows written, the kept stored
    rows first in stored order (a replaced row where it stood), then from ``first_insert`` on the
    inserted records."""
    replaced_np = np.asarray(replaced.to_numpy(zero_copy_only=False), dtype=bool)
    dropped_np = np.asarray(dropped.to_numpy(zero_copy_only=False), dtype=bool)
    # a stored row that stays sits at its rank among the kept rows in the new file
    at_new = np.cumsum(~dropped_np) - 1
    changes = merge_changes(before, replaced_np, dropped_np, after, at_new[replaced_np],
                            np.arange(first_insert, after.num_rows, dtype=np.int64))
    return encode_cdc_stats(write_changes(storage, ctx, bucket, task, changes))


def write_changes(storage: Storage, ctx: WriteContext, bucket: WriteBucket, task: TaskInfo,
                  changes: Changes) -> dict[str, int]:
    """Write a file group's change data files for this write; its ``cdcStats`` (path -> size of
    every file written), as :func:`write_cdc_file` writes them with the write's log sizes."""
    assert ctx.cdc_mode is not None
    return write_cdc_file(storage, changes, partition=bucket.partition_path, file_id=bucket.file_id_prefix,
                          instant=ctx.instant_time, token=task.token, mode=ctx.cdc_mode,
                          writer_schema=ctx.settings.avro_schema, max_file_size=ctx.log_max_size,
                          max_block_size=ctx.log_block_max_size)


def write_cdc_file(storage: Storage, changes: Changes, *, partition: str, file_id: str, instant: str, token: str,
                   mode: str, writer_schema: str, max_file_size: int = LOG_MAX_SIZE,
                   max_block_size: int = LOG_BLOCK_MAX_SIZE) -> dict[str, int]:
    """A file group's change data files for a write (merges, compaction); their ``cdcStats``.

    The changes go in blocks of at most about ``max_block_size`` bytes
    (``hoodie.logfile.data.block.max.size``; ``HoodieCDCLogger.flushIfNeeded``) into
    ``.{fileId}_{instant}.log.1_{token}.cdc``. After each block, a file larger than
    ``max_file_size`` (``hoodie.logfile.max.size``) is closed and the next block opens the next
    version, with the same write token and suffix (``HoodieLogFormatWriter.appendBlocks`` ->
    ``rolloverIfNeeded``; ``HoodieLogFormat.WriterBuilder`` appends ``.cdc`` to the rollover
    token too): ``.log.2_{token}.cdc``, ... . No file is opened after the last block. Every file is
    in the stats (``HoodieCDCLogger.getCDCWriteStats``: each path a block was appended to, with
    its size) and is created with a CREATE marker. A file of the same name left by an earlier
    attempt of this task is replaced (the marker names it already)."""
    blocks = cdc_blocks(changes, LoggingMode.of(mode), writer_schema, instant, max_block_size=max_block_size)
    stats: dict[str, int] = {}
    version, pending, size = 1, [], 0
    for block in blocks:
        pending.append(block)
        size += len(block)
        if size > max_file_size:
            stats.update(_write_one(storage, b"".join(pending), partition, file_id, instant, token, version))
            version, pending, size = version + 1, [], 0
    if pending:
        stats.update(_write_one(storage, b"".join(pending), partition, file_id, instant, token, version))
    return stats


def _write_one(storage: Storage, payload: bytes, partition: str, file_id: str, instant: str, token: str,
               version: int) -> dict[str, int]:
    rel = relative_path(partition, cdc_file_name(file_id, instant, token, version))
    create_marker(storage, instant, rel, CREATE)
    try:
        storage.create_new(rel, payload)
    except HudiFileExistsError:  # a retry of the same task attempt token: the file is ours to replace
        storage.write_bytes(rel, payload)
    return {rel: len(payload)}


def slice_changes(before: pa.Table | None, after: pa.Table) -> Changes:
    """The changes a compaction made to a file slice's base file (``HoodieMergeHandleWithChangeLog``
    on the compactor path): ``before`` the old base file's rows (None: the group had none), ``after``
    the compacted rows. A stored record whose compacted version carries another commit time was
    replaced by a log record (``u``), one missing was deleted (``d``), a new key was inserted (``i``);
    a record the logs did not change keeps its commit time and logs nothing."""
    if before is None:
        before = after.slice(0, 0)
    old_keys, new_keys = before.column(RECORD_KEY), after.column(RECORD_KEY)
    at = pc.index_in(old_keys, value_set=new_keys.combine_chunks())
    present = at.is_valid().to_numpy(zero_copy_only=False)
    at_np = pc.fill_null(at, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    changed_time = pc.not_equal(before.column(COMMIT_TIME).cast(pa.string()),
                                after.column(COMMIT_TIME).cast(pa.string()).take(pa.array(at_np))) \
        if before.num_rows and after.num_rows else pa.array(np.zeros(before.num_rows, bool))
    updated = present & pc.fill_null(changed_time, True).to_numpy(zero_copy_only=False)
    inserted = np.flatnonzero(~pc.is_in(new_keys, value_set=old_keys.combine_chunks()).to_numpy(zero_copy_only=False))
    return merge_changes(before, updated, ~present, after, at_np[updated], inserted.astype(np.int64))


def encode_cdc_stats(stats: dict[str, int] | None) -> str | None:
    """``cdcStats`` as the stats column carries it (JSON), None when the handle wrote no change data."""
    return json.dumps(stats, sort_keys=True) if stats else None
