"""Data skipping: which partitions and base files a query's filter can rule out, before Spark plans.

A query filter is translated (by :mod:`pyhudi.spark.filters`) into the small predicate language
below. It is evaluated against value ranges: a partition's values (exact, from its path) or a base
file's column statistics (min, max and null count over its row groups, from the parquet footer,
which every base file carries). A partition or file is skipped only when the predicate cannot be
true for any of its rows; anything the language does not express is :class:`Unknown` and keeps
everything. Spark still applies the full filter to the rows of what is kept, and skips row groups
and pages inside the kept files itself.

Evaluation is three-valued as in SQL: for every predicate we compute whether it *may be true* and
whether it *may be false* on some row of the range (a null makes a comparison neither), so ``NOT``
is exact.

Footers are read once per file and process (base files are immutable: a new version is a new
file name), several at a time.
"""

from __future__ import annotations

import datetime as dt
import math
import posixpath
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.storage import Storage


# -- predicates ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compare:
    """``column <op> value`` with op one of ``= < <= > >= !=``."""

    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class In:
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class IsNull:
    column: str


@dataclass(frozen=True)
class IsNotNull:
    column: str


@dataclass(frozen=True)
class StartsWith:
    column: str
    prefix: str


@dataclass(frozen=True)
class And:
    children: tuple[Predicate, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Predicate, ...]


@dataclass(frozen=True)
class Not:
    child: Predicate


@dataclass(frozen=True)
class Unknown:
    """Part of a filter the language cannot express: it may be true or false anywhere."""


Predicate = Compare | In | IsNull | IsNotNull | StartsWith | And | Or | Not | Unknown


def columns_of(pred: Predicate) -> set[str]:
    """Columns a predicate reads (``Unknown`` parts read nothing we know of)."""
    if isinstance(pred, (And, Or)):
        return set().union(*[columns_of(c) for c in pred.children]) if pred.children else set()
    if isinstance(pred, Not):
        return columns_of(pred.child)
    if isinstance(pred, Unknown):
        return set()
    return {pred.column}


# -- ranges --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnRange:
    """What is known of one column over a set of rows (a file, a partition)."""

    min: Any  # None when every value is null, or when unknown
    max: Any
    null_count: int | None  # None: unknown
    count: int
    floating: bool = False  # NaN may hide among the values: it is larger than any number in Spark


def exact(value: Any) -> ColumnRange:
    """The range of a column holding ``value`` on every row (a partition value)."""
    return ColumnRange(value, value, 1 if value is None else 0, 1)


_ORDERED = (str, int, float, Decimal, dt.date, dt.datetime, bytes)


def _comparable(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        return not (isinstance(a, float) and math.isnan(a)) and not (isinstance(b, float) and math.isnan(b))
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return isinstance(a, dt.datetime) and isinstance(b, dt.datetime) and \
            (a.tzinfo is None) == (b.tzinfo is None)
    return isinstance(a, _ORDERED) and type(a) is type(b)


_MAYBE = (True, True)


def _compare(op: str, r: ColumnRange, v: Any) -> tuple[bool, bool]:
    if r.null_count is not None and r.null_count >= r.count:
        return False, False  # only nulls: a comparison is never true nor false
    if r.min is None or r.max is None or v is None or not (_comparable(r.min, v) and _comparable(r.max, v)):
        return _MAYBE
    lo, hi = r.min, r.max
    big = r.floating  # NaN sorts above every number in Spark, and the statistics leave it out
    if op == "=":
        return lo <= v <= hi, not (lo == hi == v and r.null_count == 0 and not big)
    if op == "!=":
        return big or not (lo == hi == v), lo <= v <= hi
    if op == "<":
        return lo < v, big or hi >= v
    if op == "<=":
        return lo <= v, big or hi > v
    if op == ">":
        return big or hi > v, lo <= v
    if op == ">=":
        return big or hi >= v, lo < v
    return _MAYBE


def _evaluate(pred: Predicate, ranges: Mapping[str, ColumnRange]) -> tuple[bool, bool]:
    """(may be true, may be false) of ``pred`` on some row described by ``ranges``."""
    if isinstance(pred, And):
        parts = [_evaluate(c, ranges) for c in pred.children]
        return all(t for t, _ in parts), any(f for _, f in parts)
    if isinstance(pred, Or):
        parts = [_evaluate(c, ranges) for c in pred.children]
        return any(t for t, _ in parts), all(f for _, f in parts)
    if isinstance(pred, Not):
        t, f = _evaluate(pred.child, ranges)
        return f, t
    if isinstance(pred, Unknown):
        return _MAYBE
    r = ranges.get(pred.column)
    if r is None:
        return _MAYBE
    if isinstance(pred, IsNull):
        if r.null_count is None:
            return _MAYBE
        return r.null_count > 0, r.null_count < r.count
    if isinstance(pred, IsNotNull):
        if r.null_count is None:
            return _MAYBE
        return r.null_count < r.count, r.null_count > 0
    if isinstance(pred, Compare):
        return _compare(pred.op, r, pred.value)
    if isinstance(pred, In):
        if not pred.values:
            return False, r.null_count is None or r.null_count < r.count
        parts = [_compare("=", r, v) for v in pred.values]
        return any(t for t, _ in parts), all(f for _, f in parts)
    if isinstance(pred, StartsWith):
        if not isinstance(r.min, str) or not isinstance(r.max, str):
            return _MAYBE
        p = pred.prefix
        # every string starting with p lies in [p, p + U+10FFFF...]: compare with the range's ends
        return not (r.max < p or r.min[:len(p)] > p), True
    return _MAYBE


def may_match(pred: Predicate, ranges: Mapping[str, ColumnRange]) -> bool:
    """Whether some row described by ``ranges`` may satisfy ``pred`` (False: skip it)."""
    return _evaluate(pred, ranges)[0]


# -- file statistics -----------------------------------------------------------------------------
def file_ranges(metadata: pq.FileMetaData, columns: Iterable[str] | None = None) -> dict[str, ColumnRange]:
    """Column ranges of a parquet file from its row-group statistics (top-level columns only)."""
    schema = metadata.schema.to_arrow_schema()
    wanted = set(columns) if columns is not None else None
    positions = {}
    for i in range(metadata.num_columns):
        path = metadata.schema.column(i).path
        if "." in path or (wanted is not None and path not in wanted):
            continue
        positions[path] = i
    out = {}
    for name, i in positions.items():
        field = schema.field(name) if name in schema.names else None
        floating = field is not None and pa.types.is_floating(field.type)
        lo = hi = None
        nulls = 0
        known = True
        for g in range(metadata.num_row_groups):
            stats = metadata.row_group(g).column(i).statistics
            if stats is None or not stats.has_null_count:
                known = False
                break
            nulls += stats.null_count
            if stats.has_min_max:
                lo = stats.min if lo is None else min(lo, stats.min)
                hi = stats.max if hi is None else max(hi, stats.max)
            elif stats.null_count < metadata.row_group(g).num_rows:
                known = False
                break
        if known:
            out[name] = ColumnRange(lo, hi, nulls, metadata.num_rows, floating)
    return out


_FOOTERS: dict[str, pq.FileMetaData] = {}
_FOOTERS_LOCK = threading.Lock()
_FOOTERS_LIMIT = 100_000


def footers(storage: Storage, paths: list[str], *, threads: int = 8) -> dict[str, pq.FileMetaData]:
    """Parquet footers of ``paths`` (relative), from the cache or read ``threads`` at a time."""
    def key(rel: str) -> str:
        return f"{storage.base_uri.rstrip('/')}/{rel}"

    with _FOOTERS_LOCK:
        found = {p: _FOOTERS[key(p)] for p in paths if key(p) in _FOOTERS}
    missing = [p for p in paths if p not in found]

    def read(rel: str) -> pq.FileMetaData:
        with storage.fs.open_input_file(storage.full(rel)) as f:
            return pq.read_metadata(f)

    if missing:
        if len(missing) == 1:
            fresh = {missing[0]: read(missing[0])}
        else:
            with ThreadPoolExecutor(max_workers=min(threads, len(missing))) as pool:
                fresh = dict(zip(missing, pool.map(read, missing)))
        with _FOOTERS_LOCK:
            if len(_FOOTERS) + len(fresh) > _FOOTERS_LIMIT:
                _FOOTERS.clear()
            _FOOTERS.update({key(p): md for p, md in fresh.items()})
        found.update(fresh)
    return found


def skip_files(storage: Storage, pred: Predicate, paths: list[str], *,
               known: Mapping[str, Mapping[str, ColumnRange]] | None = None) -> list[str]:
    """The files among ``paths`` whose statistics say ``pred`` may hold on some row.

    ``known``: statistics by file name (the metadata table's column_stats partition); footers are
    read only for the other files."""
    columns = columns_of(pred)
    if not columns or not paths:
        return list(paths)
    known = known or {}
    metas = footers(storage, [p for p in paths if posixpath.basename(p) not in known])
    return [p for p in paths if may_match(pred, known[posixpath.basename(p)] if posixpath.basename(p) in known
                                          else file_ranges(metas[p], columns))]


def partition_ranges(values: Mapping[str, str | None], types: Mapping[str, Callable[[str], Any] | None]) -> \
        dict[str, ColumnRange]:
    """Exact ranges of a partition's columns from the values in its path, each parsed with the
    column's parser (columns without one are left out: unknown)."""
    out = {}
    for name, text in values.items():
        parse = types.get(name)
        if parse is None:
            continue
        try:
            out[name] = exact(None if text is None else parse(text))
        except (TypeError, ValueError):
            continue
    return out


# -- partitions ----------------------------------------------------------------------------------
def partition_values(path: str, fields: tuple[str, ...], *, hive: bool, encoded: bool,
                     default_names: tuple[str, ...] = ()) -> dict[str, str | None] | None:
    """The values of ``fields`` named by a partition path (or its first levels), None when the path
    does not have that shape. ``default_names`` are the folder names of a null value."""
    parts = path.split("/") if path else []
    if len(parts) != len(fields):
        return None
    out: dict[str, str | None] = {}
    for name, part in zip(fields, parts):
        if hive:
            named, _, part = part.partition("=")
            if named != name:
                return None
        if encoded:
            part = urllib.parse.unquote(part)
        out[name] = None if part in default_names else part
    return out


def prune_partition_paths(storage: Storage, pred: Predicate, fields: tuple[str, ...], *, hive: bool,
                          encoded: bool, parsers: Mapping[str, Callable[[str], Any] | None],
                          default_names: tuple[str, ...] = (), marker: str | None = None) -> list[str] | None:
    """The partitions ``pred`` may hold for, found by listing folders level by level: a level whose
    value rules the partition out is never listed below. None when the folders do not look like
    ``fields`` (the caller then lists the whole table).

    ``marker`` names the file every partition folder holds; a kept folder without it (a value
    with a ``/`` in it makes deeper folders) makes the pruning give up.
    """
    if not fields:
        return None
    frontier = [""]
    for level in range(len(fields)):
        names = fields[:level + 1]
        found = []
        for parent in frontier:
            for d in storage.list_dirs(parent):
                if d.startswith("."):
                    continue
                rel = posixpath.join(parent, d) if parent else d
                values = partition_values(rel, names, hive=hive, encoded=encoded, default_names=default_names)
                if values is None:
                    return None
                if may_match(pred, partition_ranges(values, parsers)):
                    found.append(rel)
        frontier = found
    if marker is not None and any(not storage.exists(posixpath.join(p, marker)) for p in frontier):
        return None
    return sorted(frontier)


# -- record keys ---------------------------------------------------------------------------------
#: most record keys a filter may name for a lookup in the record index to be worth it
MAX_INDEXED_KEYS = 1000


def record_keys(pred: Predicate, *, key_column: str, key_field: str | None,
                bare: bool = False) -> frozenset[str] | None:
    """The stored record keys a row matching ``pred`` can have, from equalities and ``IN`` lists
    on the record key: on ``key_column`` (``_hoodie_record_key``) a string is the key itself; on
    ``key_field``, the table's one record key field, a string or integer ``v`` is stored as ``v``
    by simple key generators and as ``v`` or ``key_field:v`` by the others (a complex key
    generator's encoding depends on the writer), so both are candidates unless ``bare`` says the
    key generator is a simple one. None when ``pred`` does not restrict the key to a set of at most
    :data:`MAX_INDEXED_KEYS`; literals of other types (floats, dates, booleans) restrict nothing,
    because their text in a key depends on the writer."""
    keys = _record_keys(pred, _KeyText(key_column, key_field, bare))
    return keys if keys is not None and len(keys) <= MAX_INDEXED_KEYS else None


@dataclass(frozen=True)
class _KeyText:
    """How a literal compared with a column is stored as a record key."""

    key_column: str
    key_field: str | None
    bare: bool

    def forms(self, column: str, value: Any) -> set[str] | None:
        if value is None:
            return set()  # (= NULL and IN (NULL) match no row)
        if column == self.key_column:
            return {value} if isinstance(value, str) else None
        if column != self.key_field or isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            return None  # (an empty value is stored as a placeholder, if at all)
        text = str(value)
        return {text} if self.bare else {text, f"{self.key_field}:{text}"}


def _record_keys(pred: Predicate, text: _KeyText) -> frozenset[str] | None:
    if isinstance(pred, Compare):
        if pred.op != "=":
            return None
        forms = text.forms(pred.column, pred.value)
        return None if forms is None else frozenset(forms)
    if isinstance(pred, In):
        out: set[str] = set()
        for value in pred.values:
            forms = text.forms(pred.column, value)
            if forms is None:
                return None
            out |= forms
        return frozenset(out)
    if isinstance(pred, And):  # every restricting conjunct holds: the keys all of them allow
        found = [k for k in (_record_keys(c, text) for c in pred.children) if k is not None]
        return frozenset.intersection(*found) if found else None
    if isinstance(pred, Or):  # a row matches one of the branches: each must restrict the key
        branches = [_record_keys(c, text) for c in pred.children]
        if not branches or any(b is None for b in branches):
            return None
        return frozenset().union(*[b for b in branches if b is not None])
    return None  # (NOT, ranges, prefixes, null tests and unknown parts allow any key)
