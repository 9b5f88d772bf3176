"""How two versions of one record become one: Apache Hudi's record payloads, column-wise.

Hudi merges records of a key in three ways, each a method of the table's payload class
(``HoodieRecordPayload``); pyhudi applies the same rules to whole Arrow tables (masks for deletes,
``coalesce`` for partial merges, one sort per batch; no per-row Python):

* :func:`precombine`: the versions of a key in one batch of incoming rows, or in a slice's log
  blocks, folded in arrival order by ``preCombine``. Every payload but
  ``PartialUpdateAvroPayload`` keeps one record, the one with the largest ordering value (the
  later on ties: ``OverwriteWithLatestAvroPayload.preCombine``, inherited by all of them).
  ``PartialUpdateAvroPayload.preCombine`` merges fields: the record of larger ordering value wins
  each field it has (not null), the other fills the rest (``mergeOldRecord`` with
  ``isPreCombining``), folded in arrival order (the fold is not associative: a field an early
  version filled in stays before a later version of smaller ordering value).
* :func:`merge_stored`: an incoming record (or a slice's merged log record) against the stored one
  (``combineAndGetUpdateValue``): keep the stored record, take the incoming (possibly merged with
  the stored), or delete the key. See :func:`merge_stored` for each payload's rule.
* :func:`payload_deletes`: which records are deletes (``isDeleted``): ``_hoodie_is_deleted`` for
  every payload (``BaseAvroPayload.isDeleteRecord``), ``Op = 'D'`` for ``AWSDmsAvroPayload``,
  ``_change_operation_type = 'd'`` for the Debezium payloads, and for ``DefaultHoodieRecordPayload``
  the delete field/marker options instead of ``_hoodie_is_deleted`` when set
  (``DefaultHoodieRecordPayload.isDeleteRecord(GenericRecord, Properties)``).

:class:`MergeSpec` describes the merge once (payload, ordering fields, delete field and marker): a
frozen, picklable value built on the driver from the table config and the options and shipped to
executors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.config.table import (
    AWS_DMS_PAYLOAD,
    DEFAULT_PAYLOAD,
    EVENT_TIME_PAYLOAD,
    MYSQL_DEBEZIUM_PAYLOAD,
    NON_DEFAULTS_PAYLOAD,
    OVERWRITE_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    POSTGRES_DEBEZIUM_PAYLOAD,
    canonical_payload,
)
from pyhudi.errors import HudiError
from pyhudi.io.avro_schema import IS_DELETED_FIELD, META_FIELDS, RECORD_KEY
from pyhudi.io.keys import first_of_runs

#: ``AWSDmsAvroPayload.OP_FIELD``: 'D' marks a delete
DMS_OP_FIELD = "Op"
#: ``DebeziumConstants.FLATTENED_OP_COL_NAME``: 'd' marks a delete
DEBEZIUM_OP_FIELD = "_change_operation_type"
#: ``DebeziumConstants.FLATTENED_LSN_COL_NAME``: PostgresDebeziumAvroPayload orders by it
POSTGRES_LSN_FIELD = "_event_lsn"
#: ``DebeziumConstants.ADDED_SEQ_COL_NAME``: "<binlog file number>.<position>", MySqlDebeziumAvroPayload
MYSQL_SEQ_FIELD = "_event_seq"
#: ``PostgresDebeziumAvroPayload.DEBEZIUM_TOASTED_VALUE``: a TOASTed column Debezium could not read
DEBEZIUM_TOASTED_VALUE = "__debezium_unavailable_value"

#: what :func:`merge_stored` decides per row
KEEP_STORED, TAKE_INCOMING, DELETE = 0, 1, 2

_DEBEZIUM = (MYSQL_DEBEZIUM_PAYLOAD, POSTGRES_DEBEZIUM_PAYLOAD)


@dataclass(frozen=True)
class MergeSpec:
    """How records of one key are reconciled: the payload class, the ordering field(s) and the
    delete field/marker. ``ordering_field`` is the first ordering field (None: the later write
    wins); several are compared left to right (Hudi 1.x ``hoodie.table.ordering.fields``)."""

    ordering_field: str | None
    keep_larger_ordering: bool = False  # DefaultHoodieRecordPayload's rule (kept for its SQL merge)
    payload: str = OVERWRITE_PAYLOAD
    more_ordering_fields: tuple[str, ...] = ()
    delete_field: str | None = None  # hoodie.payload.delete.field (DefaultHoodieRecordPayload)
    delete_marker: str | None = None  # hoodie.payload.delete.marker

    @classmethod
    def of(cls, ordering: str | None, payload_class: str | None, *, delete_field: str | None = None,
           delete_marker: str | None = None) -> MergeSpec:
        """The merge of ``payload_class`` (None: OverwriteWithLatestAvroPayload) ordered by
        ``ordering`` (a field, or several comma-separated)."""
        fields = tuple(f.strip() for f in (ordering or "").split(",") if f.strip())
        payload = canonical_payload(payload_class) if payload_class else OVERWRITE_PAYLOAD
        return cls(fields[0] if fields else None, keep_larger_ordering=payload == DEFAULT_PAYLOAD,
                   payload=payload, more_ordering_fields=fields[1:], delete_field=delete_field or None,
                   delete_marker=delete_marker if delete_field else None)

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        return ((self.ordering_field,) if self.ordering_field else ()) + self.more_ordering_fields

    def ordering_in(self, names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
        """The ordering fields ``names`` holds (all or none: a record of another schema lacking one
        cannot be ordered by the rest alone)."""
        fields = self.ordering_fields
        return fields if fields and all(f in names for f in fields) else ()

    @property
    def is_partial(self) -> bool:
        """Whether a merge may combine the fields of two records (not pick one of them)."""
        return self.payload in (NON_DEFAULTS_PAYLOAD, PARTIAL_UPDATE_PAYLOAD, POSTGRES_DEBEZIUM_PAYLOAD)

    @property
    def incoming_always_wins(self) -> bool:
        """Whether the incoming record replaces (or deletes) the stored one whatever their values:
        ``combineAndGetUpdateValue`` of OverwriteWithLatestAvroPayload and AWSDmsAvroPayload."""
        return self.payload in (OVERWRITE_PAYLOAD, AWS_DMS_PAYLOAD)

    @property
    def delete_spares_larger_stored(self) -> bool:
        """Whether a stored (base file) record whose ordering value is larger than a later delete's
        survives it: where ``combineAndGetUpdateValue`` looks at the ordering values before it
        looks at the delete (DefaultHoodieRecordPayload, the Debezium payloads; pyhudi's merge of
        OverwriteWithLatestAvroPayload slices has kept Hudi 1.x's event-time rule). With
        EventTimeAvroPayload, AWSDmsAvroPayload, OverwriteNonDefaults and PartialUpdate the delete
        wins whatever the values (Hudi 0.x reads a delete block as an empty payload of the table's
        class, whose ``combineAndGetUpdateValue`` deletes)."""
        return self.payload in (OVERWRITE_PAYLOAD, DEFAULT_PAYLOAD, *_DEBEZIUM)

    def stored_order_fields(self) -> tuple[str, ...]:
        """The fields ``combineAndGetUpdateValue`` compares the stored and incoming records by."""
        if self.payload == POSTGRES_DEBEZIUM_PAYLOAD:
            return (POSTGRES_LSN_FIELD,)
        if self.payload == MYSQL_DEBEZIUM_PAYLOAD:
            return (MYSQL_SEQ_FIELD,)
        return self.ordering_fields

    def key_columns(self) -> tuple[str, ...]:
        """The record fields a merge reads besides the key: ordering fields, the fields the stored
        record is compared by and those that mark deletes."""
        extra = [*self.ordering_fields, *self.stored_order_fields()]
        if self.delete_field:
            extra.append(self.delete_field)
        if self.payload == AWS_DMS_PAYLOAD:
            extra.append(DMS_OP_FIELD)
        if self.payload in _DEBEZIUM:
            extra.append(DEBEZIUM_OP_FIELD)
        return tuple(dict.fromkeys(extra))


def _false(n: int) -> pa.Array:
    return pa.array(np.zeros(n, dtype=bool))


def _flat(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _text_equals(values: pa.ChunkedArray | pa.Array, text: str, *, ignore_case: bool) -> pa.Array:
    as_text = _flat(values)
    if not (pa.types.is_string(as_text.type) or pa.types.is_large_string(as_text.type)):
        as_text = as_text.cast(pa.string())
    if ignore_case:
        as_text = pc.utf8_lower(as_text)
        text = text.lower()
    return pc.fill_null(pc.equal(as_text, text), False)


def payload_deletes(rows: pa.Table, spec: MergeSpec) -> pa.Array:
    """Mask of the records the payload takes for deletes (see the module docstring); never null."""
    n = rows.num_rows
    names = rows.column_names
    if spec.delete_field:  # DefaultHoodieRecordPayload.isDeleteRecord(record, properties)
        if spec.delete_field not in names:
            return _false(n)
        return _text_equals(rows.column(spec.delete_field), spec.delete_marker or "", ignore_case=False)
    mask = _false(n)
    if IS_DELETED_FIELD in names and pa.types.is_boolean(rows.schema.field(IS_DELETED_FIELD).type):
        mask = pc.fill_null(_flat(rows.column(IS_DELETED_FIELD)), False)
    if spec.payload == AWS_DMS_PAYLOAD and DMS_OP_FIELD in names:  # AWSDmsAvroPayload.isDMSDeleteRecord
        mask = pc.or_(mask, _text_equals(rows.column(DMS_OP_FIELD), "D", ignore_case=True))
    if spec.payload in _DEBEZIUM and DEBEZIUM_OP_FIELD in names:  # isDebeziumDeleteRecord
        mask = pc.or_(mask, _text_equals(rows.column(DEBEZIUM_OP_FIELD), "d", ignore_case=True))
    return mask


def _order_values(rows: pa.Table, fields: tuple[str, ...], spec: MergeSpec) -> list[pa.Array] | None:
    """The columns records are compared by, left to right (None: ``rows`` lacks one)."""
    if not fields or any(f not in rows.column_names for f in fields):
        return None
    if fields == (MYSQL_SEQ_FIELD,) and spec.payload == MYSQL_DEBEZIUM_PAYLOAD:
        # MySqlDebeziumAvroPayload.shouldPickCurrentRecord: "<file>.<pos>" compared as two numbers
        seq = _flat(rows.column(MYSQL_SEQ_FIELD)).cast(pa.string())
        parts = pc.split_pattern(seq, ".", max_splits=1)
        return [pc.list_element(parts, i).cast(pa.int64()) for i in (0, 1)]
    return [_flat(rows.column(f)) for f in fields]


def _greater(a: list[pa.Array], b: list[pa.Array]) -> pa.Array:
    """``a > b`` compared left to right (Kleene logic: null where a null value decides)."""
    greater: pa.Array = _false(len(a[0]))
    equal_so_far: pa.Array = pa.array(np.ones(len(a[0]), dtype=bool))
    for x, y in zip(a, b):
        if x.type != y.type:
            y = y.cast(x.type)
        greater = pc.or_kleene(greater, pc.and_kleene(equal_so_far, pc.greater(x, y)))
        equal_so_far = pc.and_kleene(equal_so_far, pc.equal(x, y))
    return greater


def _all_valid(values: list[pa.Array]) -> pa.Array:
    out: pa.Array = pa.array(np.ones(len(values[0]), dtype=bool))
    for v in values:
        out = pc.and_(out, pc.is_valid(v))
    return out


def merged_columns(names: list[str]) -> list[str]:
    """The columns a partial merge combines: the record's own fields, not Hudi's meta fields (a
    write sets those for the record it writes) nor pyhudi's helper columns."""
    return [n for n in names if n not in META_FIELDS and not n.startswith("_pyhudi")]


def _coalesce(first: pa.Array, second: pa.Array) -> pa.Array:
    if second.type != first.type:
        second = second.cast(first.type)
    return pc.if_else(pc.is_valid(first), first, second)


def _toasted(values: pa.Array) -> pa.Array | None:
    """Mask of the values Debezium could not read (TOASTed): string or binary columns only."""
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.fill_null(pc.equal(values, DEBEZIUM_TOASTED_VALUE), False)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pc.fill_null(pc.equal(values, pa.scalar(DEBEZIUM_TOASTED_VALUE.encode(), kind)), False)
    return None


def merge_stored(stored: pa.Table, incoming: pa.Table, incoming_deletes: pa.Array,
                 spec: MergeSpec) -> tuple[pa.Table, np.ndarray]:
    """``combineAndGetUpdateValue(stored, incoming)`` row by row: ``stored`` and ``incoming`` hold
    the two records of each key at the same row, with the same columns. Returns the records to
    write where the incoming side wins (``incoming`` with fields merged from ``stored`` where the
    payload merges fields) and, per row, :data:`KEEP_STORED`, :data:`TAKE_INCOMING` or
    :data:`DELETE`.

    An incoming delete whose ordering value is null is a delete of the ``delete`` operation (Hudi's
    empty payload, ``recordBytes.length == 0``): it removes the stored record under every payload.

    * OverwriteWithLatestAvroPayload, AWSDmsAvroPayload: the incoming record, or the delete.
    * OverwriteNonDefaultsWithLatestAvroPayload: the incoming record with each null field taken
      from the stored one (``mergeRecords``/``setField``: a field equal to its default, null in
      the schemas pyhudi writes, keeps the stored value); a delete deletes.
    * PartialUpdateAvroPayload: a delete deletes ("natural order", ``mergeOldRecord``); otherwise
      the fields of the newer record (the stored one when its ordering value is strictly larger,
      ``isRecordNewer``) with nulls filled from the other. The meta fields are the incoming
      record's (``mergeDisorderRecordsWithMetadata``).
    * DefaultHoodieRecordPayload: the stored record stays when its ordering value is strictly
      larger (``needUpdatingPersistedRecord``), also against an incoming delete; else the incoming
      record or the delete.
    * EventTimeAvroPayload: an incoming delete always deletes (it checks ``isDeletedRecord`` before
      the ordering values); otherwise as DefaultHoodieRecordPayload.
    * PostgresDebeziumAvroPayload: the stored record stays when its ``_event_lsn`` is larger than
      the incoming one's (``shouldPickCurrentRecord``), also against a delete; else the incoming
      record (``__debezium_unavailable_value`` fields keep the stored value,
      ``mergeToastedValuesIfPresent``) or the delete.
    * MySqlDebeziumAvroPayload: the same by ``_event_seq`` ("<file>.<pos>", file then position
      compared as numbers); the stored record also stays on an equal position.
    """
    n = incoming.num_rows
    deletes = _flat(incoming_deletes)
    take = np.where(deletes.to_numpy(zero_copy_only=False), DELETE, TAKE_INCOMING).astype(np.int8)
    if n == 0:
        return incoming, take
    fields = spec.stored_order_fields()
    if spec.payload in _DEBEZIUM and fields[0] not in incoming.column_names:
        raise HudiError(f"{spec.payload.rsplit('.', 1)[1]} orders records by {fields[0]}, which the records lack; "
                        f"write the Debezium change records with their {fields[0]} column")
    new = _order_values(incoming, fields, spec)
    old = _order_values(stored, fields, spec)
    if new is not None:
        hard_delete = pc.and_(deletes, pc.invert(_all_valid(new)))  # the delete operation: no ordering value
    else:
        hard_delete = deletes
    if spec.payload in _DEBEZIUM and new is not None:
        missing = pc.and_(pc.invert(deletes), pc.invert(_all_valid(new)))
        if pc.any(missing).as_py():
            raise HudiError(f"{fields[0]} is null in an incoming record, which {spec.payload.rsplit('.', 1)[1]} "
                            "needs to order it against the stored record (HoodieDebeziumAvroPayloadException)")
    keep: pa.Array | None = None
    if old is not None and new is not None and spec.payload in (DEFAULT_PAYLOAD, EVENT_TIME_PAYLOAD,
                                                                  POSTGRES_DEBEZIUM_PAYLOAD):
        keep = pc.fill_null(_greater(old, new), False)
    elif old is not None and new is not None and spec.payload == MYSQL_DEBEZIUM_PAYLOAD:
        keep = pc.and_(_all_valid(old), pc.invert(pc.fill_null(_greater(new, old), True)))
    if keep is not None:
        keep = pc.and_(keep, pc.invert(hard_delete))
        if spec.payload == EVENT_TIME_PAYLOAD:
            keep = pc.and_(keep, pc.invert(deletes))
        take[keep.to_numpy(zero_copy_only=False)] = KEEP_STORED
    if not spec.is_partial:
        return incoming, take
    out = incoming
    columns = merged_columns(incoming.column_names)
    if spec.payload == POSTGRES_DEBEZIUM_PAYLOAD:
        for name in columns:
            if name not in stored.column_names:
                continue
            values = _flat(incoming.column(name))
            toasted = _toasted(values)
            if toasted is not None and pc.any(toasted).as_py():
                out = out.set_column(out.schema.get_field_index(name), name,
                                     pc.if_else(toasted, _flat(stored.column(name)).cast(values.type), values))
        return out.cast(incoming.schema), take
    stored_newer = None
    if spec.payload == PARTIAL_UPDATE_PAYLOAD and old is not None and new is not None:
        stored_newer = pc.fill_null(_greater(old, new), False)  # PartialUpdateAvroPayload.isRecordNewer
    for name in columns:
        if name not in stored.column_names:
            continue
        mine, theirs = _flat(incoming.column(name)), _flat(stored.column(name))
        merged = _coalesce(mine, theirs)
        if stored_newer is not None:
            merged = pc.if_else(stored_newer, _coalesce(theirs.cast(mine.type), mine), merged)
        out = out.set_column(out.schema.get_field_index(name), name, merged)
    return out.cast(incoming.schema), take  # (the fields as declared: set_column makes them nullable)


def precombine(rows: pa.Table, spec: MergeSpec, *, rank: np.ndarray | None = None,
               delete_flag: str | None = None, key: str = RECORD_KEY) -> pa.Table:
    """One row per record key (rows in key order): the versions of each key folded by the
    payload's ``preCombine`` in arrival order (see the module docstring). ``rank`` is the arrival
    order (larger: later; default the row order); ``delete_flag`` names a boolean column of
    ``rows`` marking deletes, recomputed for the merged rows of PartialUpdateAvroPayload from the
    merged ``_hoodie_is_deleted`` (a delete of the ``delete`` operation stays a delete); ``key``
    the column whose equal values are versions of one record (default the record key).

    A null ordering value (deletes may have one) loses to any other.
    """
    n = rows.num_rows
    rank_values = np.arange(n, dtype=np.int64) if rank is None else rank
    work = rows.append_column("_pyhudi_rank", pa.array(rank_values))
    ordering = spec.ordering_in(rows.column_names)
    if spec.payload != PARTIAL_UPDATE_PAYLOAD:
        sort_keys = [(key, "ascending")] + [(f, "descending") for f in ordering] + \
            [("_pyhudi_rank", "descending")]
        order = pc.sort_indices(work, sort_keys=[(name, o, "at_end") for name, o in sort_keys])
        ordered = rows.take(order)
        return ordered.filter(pa.array(first_of_runs(_flat(ordered.column(key)))))
    ordered = rows.take(pc.sort_indices(work, sort_keys=[(key, "ascending"), ("_pyhudi_rank", "ascending")]))
    winners = _fold_partial(ordered, ordering, key)
    if delete_flag and delete_flag in rows.column_names and IS_DELETED_FIELD in rows.column_names:
        merged_flag = winners.column(IS_DELETED_FIELD)
        if pa.types.is_boolean(merged_flag.type):
            # a delete flagged outside the payload (operation delete, a MERGE's matched delete) carries
            # no ordering value: it is a hard delete; so is every flagged row where nothing orders
            ordering_null = pc.invert(_all_valid([_flat(winners.column(f)) for f in ordering])) if ordering \
                else pc.invert(_false(winners.num_rows))
            hard = pc.and_(pc.fill_null(_flat(winners.column(delete_flag)), False), ordering_null)
            flag = pc.or_(hard, pc.fill_null(_flat(merged_flag), False))
            winners = winners.set_column(winners.schema.get_field_index(delete_flag), delete_flag, flag)
    return winners


def _fold_partial(ordered: pa.Table, ordering: tuple[str, ...], key: str) -> pa.Table:
    """``PartialUpdateAvroPayload.preCombine`` folded over each run of a key (``ordered``: by key,
    then arrival): round ``j`` merges the ``j``-th version of every key that has one into what the
    earlier versions gave, column-wise; there are as many rounds as a key has versions.

    Each step is ``mergeOldRecord(old, isOldRecordNewer, isPreCombining=true)``: the fields of the
    record with the larger ordering value (the incoming one on ties) over the other's nulls; the
    meta fields are the incoming record's (``mergeDisorderRecordsWithMetadata``), and the result
    carries the larger ordering value.
    """
    n = ordered.num_rows
    first = first_of_runs(_flat(ordered.column(key)))
    starts = np.flatnonzero(first)
    lengths = np.diff(np.append(starts, n))
    acc = ordered.take(pa.array(starts))
    merged_names = set(merged_columns(ordered.column_names))
    for j in range(1, int(lengths.max()) if len(lengths) else 0):
        groups = np.flatnonzero(lengths > j)
        this = ordered.take(pa.array(starts[groups] + j))
        old = acc.take(pa.array(groups))
        old_newer = _false(len(groups))
        if ordering:
            old_newer = pc.fill_null(_greater([_flat(old.column(f)) for f in ordering],
                                              [_flat(this.column(f)) for f in ordering]), False)
        columns = []
        for name in ordered.column_names:
            mine, theirs = _flat(this.column(name)), _flat(old.column(name))
            value = _coalesce(mine, theirs)
            if name in merged_names:
                value = pc.if_else(old_newer, _coalesce(theirs, mine), value)
            columns.append(value)
        step = pa.Table.from_arrays(columns, schema=ordered.schema)
        index = np.arange(acc.num_rows, dtype=np.int64)
        index[groups] = acc.num_rows + np.arange(len(groups), dtype=np.int64)
        acc = pa.concat_tables([acc, step]).take(pa.array(index))
    return acc


def insert_values(rows: pa.Table, deletes: pa.Array) -> pa.Table:
    """``getInsertValue``: the records of keys nothing is stored for; a delete writes nothing."""
    return rows.filter(pc.invert(_flat(deletes)))
