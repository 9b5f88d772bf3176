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

The file is created with a CREATE marker naming it (``HoodieWriteHandle.getLogCreationCallback``),
so a failed write's rollback deletes it with the base file; its path and size go into the write
stat's ``cdcStats`` (``HoodieCDCLogger.getCDCWriteStats``: partition-relative path -> bytes).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiFileExistsError
from pyhudi.io.avro_schema import META_FIELDS, RECORD_KEY
from pyhudi.io.cdc import DELETE, INSERT, UPDATE, Changes, LoggingMode, cdc_blocks, cdc_file_name
from pyhudi.io.file_names import relative_path
from pyhudi.storage import Storage
from pyhudi.write.markers import CREATE, create_marker
from pyhudi.write.plan import WriteBucket, WriteContext
from pyhudi.write.task import TaskInfo

#: ``hoodie.logfile.data.block.max.size`` (``HoodieStorageConfig``): a change data block holds at most this much
CDC_BLOCK_MAX_SIZE = 256 * 1024 * 1024


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


def write_changes(storage: Storage, ctx: WriteContext, bucket: WriteBucket, task: TaskInfo,
                  changes: Changes) -> dict[str, int]:
    """Write a file group's change data file for this write; its ``cdcStats`` entry (path -> size).

    One file ``.{fileId}_{instant}.log.1_{token}.cdc`` with the changes in blocks of at most
    :data:`CDC_BLOCK_MAX_SIZE`; a file of the same name left by an earlier attempt of this task is
    replaced (the marker names it already)."""
    assert ctx.cdc_mode is not None
    blocks = list(cdc_blocks(changes, LoggingMode.of(ctx.cdc_mode), ctx.settings.avro_schema, ctx.instant_time,
                             max_block_size=CDC_BLOCK_MAX_SIZE))
    payload = b"".join(blocks)
    rel = relative_path(bucket.partition_path, cdc_file_name(bucket.file_id_prefix, ctx.instant_time, task.token))
    create_marker(storage, ctx.instant_time, rel, CREATE)
    try:
        storage.create_new(rel, payload)
    except HudiFileExistsError:  # a retry of the same task attempt token: the file is ours to replace
        storage.write_bytes(rel, payload)
    return {rel: len(payload)}


def encode_cdc_stats(stats: dict[str, int] | None) -> str | None:
    """``cdcStats`` as the stats column carries it (JSON), None when the handle wrote no change data."""
    return json.dumps(stats, sort_keys=True) if stats else None
