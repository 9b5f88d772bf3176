"""Merging a file slice that holds partial records: Hudi 1.x partial updates, column-wise.

Hudi 1.x writes a log data block of *partial* records when a ``MERGE INTO`` assigns only some
columns of a merge-on-read table (``MergeIntoHoodieTableCommand``, option
``hoodie.spark.sql.merge.into.partial.updates``): the block's ``SCHEMA`` header holds the five
meta fields and the assigned columns only, and its header says ``IS_PARTIAL=true``
(``HoodieAppendHandle.getUpdatedHeader``). Once a slice has such a block, Hudi's file-group reader
merges every record of the slice by ``HoodieRecordMerger.partialMerge`` (``enablePartialMerging``
in ``HoodieKeyBasedFileGroupRecordBuffer.processDataBlock``; ``PartialUpdateBufferedRecordMerger``
in ``BufferedRecordMergerFactory``), and this module does the same:

* Log records of a key are folded in log order, each new record against the one before it
  (``deltaMerge(new, existing)`` -> ``partialMerge(older=existing, newer=new)``).
  ``HoodieSparkRecordMerger.partialMerge``: if the older one is a delete, the newer record is
  taken as it is (partial or not); if the older record's ordering value is larger, its columns win
  and the newer one only fills the columns the older lacks; otherwise (ties too) the newer
  record's columns overlay the older's (``SparkRecordMergingUtils.mergePartialRecords``). The
  result holds the union of both records' columns.
* A delete (delete block) against the record before it follows the non-partial rule
  (``deleteRecordMerger``, ``EventTimeRecordMerger.deltaMerge(DeleteRecord, ...)``): the record
  survives when the delete carries a real ordering value and the record's is larger.
* The log's result meets the base record the same way (``finalMerge`` -> ``partialMerge(base,
  log)``): a log delete removes the base record; a log record overlays its columns on it unless
  the base record's ordering value is larger. A key with no base record is output with the columns
  its records never set null (``rewriteRecordWithNewSchema`` to the reader schema).
* ``_hoodie_is_deleted = true`` in a merged record deletes the key (``isDelete``).

Hudi merges partial records this way only through its record mergers (event-time or commit-time
ordering, i.e. pyhudi's ``DefaultHoodieRecordPayload`` / ``OverwriteWithLatestAvroPayload``
specs); a payload-class merge has no ``partialMerge`` (``HoodieRecordMerger.partialMerge`` throws
``UnsupportedOperationException``), and a partial record without the table's ordering field cannot
be compared (``HoodieSparkRecord.getOrderingValue`` gives ``0``). Both are refused by name.

The fold runs in rounds: round ``k`` merges the ``k``-th log entry of every key at once (masks,
``if_else``, ``take``); there are as many rounds as the most entries one key has in the slice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.config.table import DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD
from pyhudi.errors import HudiUnsupportedError
from pyhudi.io.avro_schema import RECORD_KEY
from pyhudi.io.base_file import align

__all__ = ["PartialBlock", "check_partial_merge", "fold_partial"]


@dataclass(frozen=True)
class PartialBlock:
    """What a reader keeps of one partial block: the reader-schema columns its schema holds, and
    where it is (for errors)."""

    columns: tuple[str, ...]
    where: str


def check_partial_merge(partial: dict[int, PartialBlock], schema: pa.Schema, payload: str,
                        ordering: tuple[str, ...]) -> None:
    """Refuse what Hudi itself cannot merge (see the module docstring), naming the block."""
    for block in partial.values():
        if payload not in (OVERWRITE_PAYLOAD, DEFAULT_PAYLOAD):
            raise HudiUnsupportedError(
                f"{block.where} holds partial records (IS_PARTIAL=true) and the table merges records with "
                f"{payload}; Hudi merges partial records only by its record mergers (event-time or commit-time "
                "ordering; a payload class has no partialMerge: HoodieRecordMerger.partialMerge throws). Compact "
                "the file group with Apache Hudi, or use Apache Hudi's own Spark bundle for this table")
        missing = [f for f in ordering if f in schema.names and f not in block.columns]
        if missing:
            raise HudiUnsupportedError(
                f"{block.where} holds partial records (IS_PARTIAL=true) without the ordering field(s) "
                f"{', '.join(missing)}; Hudi cannot order them against other versions of their keys "
                "(HoodieSparkRecord.getOrderingValue gives 0 for a missing field). Compact the file group with "
                "Apache Hudi, or use Apache Hudi's own Spark bundle for this table")


def _larger(a: list[pa.Array], b: list[pa.Array]) -> np.ndarray:
    """``a > b`` left to right; false where a value is missing (the newer record then wins)."""
    if not a:
        return np.zeros(0, dtype=bool)
    n = len(a[0])
    greater = np.zeros(n, dtype=bool)
    equal = np.ones(n, dtype=bool)
    for x, y in zip(a, b):
        if x.type != y.type:
            y = y.cast(x.type)
        gt = pc.fill_null(pc.greater(x, y), False).to_numpy(zero_copy_only=False)
        eq = pc.fill_null(pc.equal(x, y), False).to_numpy(zero_copy_only=False)
        greater |= equal & gt
        equal &= eq
    return greater


def _scatter(current: pa.Array, idx: np.ndarray, values: pa.Array) -> pa.Array:
    """``current`` with ``current[idx] = values`` (one take over the two arrays)."""
    src = np.arange(len(current), dtype=np.int64)
    src[idx] = len(current) + np.arange(len(idx), dtype=np.int64)
    if values.type != current.type:
        values = values.cast(current.type)
    return pa.concat_arrays([current, values]).take(pa.array(src))


def fold_partial(stored: pa.Table, records: pa.Table, positions: np.ndarray, has: np.ndarray,
                 deletes: pa.Table | None, schema: pa.Schema, ordering: tuple[str, ...],
                 payload_deleted: np.ndarray) -> tuple[pa.Table, int, int]:
    """Merge a slice's log entries with its base records by Hudi's partial merge.

    ``records`` are the log data records in the reader schema (block order, rows in block order),
    ``positions`` their block positions, ``has`` a bool matrix (record x column of ``schema``)
    saying which columns each record's block holds, ``payload_deleted`` which records are deletes
    by their own values. ``deletes`` has one row per delete-block entry (``record_key``,
    ``ordering_is_default``, ``ordering_value``, ``_pyhudi_pos``). Returns the merged records
    (key order, soft deletes not yet dropped), how many keys the log updated or inserted, and how
    many base records it deleted.
    """
    names = schema.names
    n_rec = records.num_rows
    # the log entries as one event list: data rows, then delete rows, ordered by (key, position)
    if deletes is not None and deletes.num_rows:
        del_keys = deletes.column("record_key").combine_chunks().cast(pa.string())
        del_pos = deletes.column("_pyhudi_pos").to_numpy()
        del_default = deletes.column("ordering_is_default").to_numpy(zero_copy_only=False).astype(bool)
        del_values = deletes.column("ordering_value").combine_chunks()
    else:
        del_keys, del_pos = pa.array([], pa.string()), np.zeros(0, np.int64)
        del_default, del_values = np.zeros(0, bool), pa.array([], pa.string())
    n_del = len(del_keys)
    keys = pa.concat_arrays([records.column(RECORD_KEY).combine_chunks().cast(pa.string()), del_keys])
    pos = np.concatenate([positions, del_pos])
    seq = np.arange(n_rec + n_del, dtype=np.int64)
    events = pa.table({"k": keys, "p": pa.array(pos), "s": pa.array(seq)})
    order = pc.sort_indices(events, sort_keys=[("k", "ascending"), ("p", "ascending"), ("s", "ascending")]).to_numpy()
    sorted_keys = keys.take(pa.array(order))
    uniq = pc.unique(sorted_keys)
    key_of = pc.index_in(sorted_keys, value_set=uniq).to_numpy(zero_copy_only=False).astype(np.int64)
    first = np.ones(len(order), dtype=bool)
    first[1:] = key_of[1:] != key_of[:-1]
    starts = np.flatnonzero(first)
    occurrence = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))

    n_keys = len(uniq)
    acc = align(pa.table({RECORD_KEY: uniq}), schema)
    cols = [acc.column(n).combine_chunks() for n in names]
    acc_has = np.zeros((n_keys, len(names)), dtype=bool)
    alive = np.zeros(n_keys, dtype=bool)  # the key's latest log state is a record
    is_del = np.zeros(n_keys, dtype=bool)  # ... is a delete
    rec_cols = [records.column(n).combine_chunks() for n in names]
    ord_idx = [names.index(f) for f in ordering]
    for k in range(int(occurrence.max()) + 1 if len(order) else 0):
        at = order[occurrence == k]
        kid = key_of[occurrence == k]
        data = at < n_rec
        # -- data records (a record the payload takes for a delete acts as a delete) --
        d_ev, d_key = at[data], kid[data]
        deleting = payload_deleted[d_ev] if len(d_ev) else np.zeros(0, dtype=bool)
        r_ev, r_key = d_ev[~deleting], d_key[~deleting]
        if len(r_ev):
            take_r = pa.array(r_ev)
            take_k = pa.array(r_key)
            older_alive = alive[r_key]
            older_wins = older_alive & _larger([pc.take(cols[i], take_k) for i in ord_idx],
                                               [pc.take(rec_cols[i], take_r) for i in ord_idx]) \
                if ord_idx else np.zeros(len(r_ev), dtype=bool)
            new_has = has[r_ev]
            old_has = acc_has[r_key] & older_alive[:, None]
            take_new = new_has & (~older_wins[:, None] | ~old_has)
            for i in range(len(names)):
                # a column neither record holds is null (a value left by a deleted version must not come back)
                before = pc.take(cols[i], take_k)
                before = pc.if_else(pa.array(old_has[:, i]), before, pa.nulls(len(before), before.type))
                merged = pc.if_else(pa.array(take_new[:, i]), pc.take(rec_cols[i], take_r), before)
                cols[i] = _scatter(cols[i], r_key, merged)
            acc_has[r_key] = old_has | new_has
            alive[r_key] = True
            is_del[r_key] = False
        # -- deletes: delete-block entries, and records that are deletes --
        x_ev, x_key = at[~data] - n_rec, kid[~data]
        if len(x_ev):
            spared = np.zeros(len(x_ev), dtype=bool)
            if ord_idx and len(ord_idx) == 1:
                target = cols[ord_idx[0]].type
                try:
                    dvals = pc.take(del_values, pa.array(x_ev)).cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    dvals = None
                if dvals is not None:
                    larger = pc.fill_null(pc.greater(pc.take(cols[ord_idx[0]], pa.array(x_key)), dvals), False)
                    spared = alive[x_key] & ~del_default[x_ev] & larger.to_numpy(zero_copy_only=False)
            gone = x_key[~spared]
            alive[gone], is_del[gone], acc_has[gone] = False, True, False
        y_key = d_key[deleting]
        if len(y_key):
            alive[y_key], is_del[y_key], acc_has[y_key] = False, True, False
    log = pa.table(dict(zip(names, cols)))
    # -- final merge with the base records --
    at = pc.index_in(stored.column(RECORD_KEY), value_set=uniq)
    matched = at.is_valid().to_numpy(zero_copy_only=False)
    s_idx = np.flatnonzero(matched)
    l_idx = at.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
    base_m = stored.take(pa.array(s_idx))
    deleted_base = is_del[l_idx]
    rec = alive[l_idx]
    base_wins = _larger([base_m.column(names[i]).combine_chunks() for i in ord_idx],
                        [pc.take(cols[i], pa.array(l_idx)) for i in ord_idx]) if ord_idx else np.zeros(len(l_idx), bool)
    overlay = rec & ~base_wins
    out_cols = {}
    for i, n in enumerate(names):
        pick = pa.array(overlay & acc_has[l_idx, i])
        out_cols[n] = pc.if_else(pick, pc.take(cols[i], pa.array(l_idx)), base_m.column(n).combine_chunks())
    merged = pa.table(out_cols, schema=schema).filter(pa.array(~deleted_base))
    in_log = np.zeros(n_keys, dtype=bool)
    in_log[l_idx] = True
    inserts = log.filter(pa.array(alive & ~in_log))
    out = pa.concat_tables([stored.filter(pa.array(~matched)), merged, inserts])
    out = out.take(pc.sort_indices(out.column(RECORD_KEY)))
    return out, int(np.count_nonzero(overlay)) + inserts.num_rows, int(np.count_nonzero(deleted_base))
