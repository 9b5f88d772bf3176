"""Which partition paths can be folders of a table, checked before a write requests its instant.

A partition path is a folder below the table's base path, and Hudi names it after the record's
values (:mod:`pyhudi.keygen.spec`): without ``hoodie.datasource.write.partitionpath.urlencode`` a
value's ``/`` makes nested folders (``americas/brazil``), which Hudi and both readers handle. A
value can also name a folder the table cannot hold, and then the write would go wrong after it had
started: data files in ``.hoodie`` or outside the table (``..``, ``/a``), files at a path other
than the one the commit records (``a/``, ``a//b``), or partitions the readers do not find. Hudi
itself refuses ``..`` segments (``PartitionPathEncodeUtils.validateNoPathTraversal``); pyhudi
refuses every path of these kinds (:data:`RULES`):

* an empty folder name: a leading, trailing or doubled ``/``;
* a folder name that starts with ``.``: ``.`` and ``..`` leave the partition's place, ``.hoodie``
  is the table's metadata folder, and listings skip other hidden folders;
* a backslash (Hudi and URL parsers read it as a separator) or a control character;
* a partition that is the parent folder of another partition, in the batch or in the table:
  Hudi's listing stops at the first folder holding ``.hoodie_partition_metadata`` and hudi-rs
  reads only leaf folders, so one of the two would vanish from reads.

Partitions of different depths that do not nest (``x`` and ``a/b``) are fine for both. The checks
run over the distinct paths of a batch with pyarrow compute, and against the table's partitions as
its metadata table lists them, or else with a batch of file-status calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from pyhudi.config.properties import PARTITION_METAFILE
from pyhudi.errors import HudiPartitionPathError
from pyhudi.storage import Storage

#: the names Hudi gives a partition's marker file (``hoodie.partition.metafile.use.base.format``)
_METAFILES = (PARTITION_METAFILE, PARTITION_METAFILE + ".parquet", PARTITION_METAFILE + ".orc")
_EXAMPLES = 3

_URLENCODE = "hoodie.datasource.write.partitionpath.urlencode=true"
_HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning=true"


@dataclass(frozen=True)
class Rule:
    """A kind of partition path a table cannot hold: the RE2 pattern that finds it, what is wrong,
    and which key generator option (for a new table) renders such values safely."""

    pattern: str
    problem: str
    remedy: str


RULES = (
    Rule(r"^/|/$|//", "an empty folder name (a leading, trailing or doubled '/')", _URLENCODE),
    Rule(r"(^|/)\.", "a folder name starting with '.' ('.' and '..' leave the partition's folder, "
                     "'.hoodie' is the table's metadata folder, listings skip hidden folders)",
         f"{_HIVE_STYLE} (and {_URLENCODE} if values hold '/')"),
    Rule(r"[\x00-\x1f\x7f\\]", "a backslash or a control character", _URLENCODE),
)


def _ancestors(paths: pa.Array) -> pa.Array:
    """Every proper parent folder of ``paths`` (``a`` and ``a/b`` for ``a/b/c``), distinct."""
    parts = pc.split_pattern(paths, "/")
    depth = pc.list_value_length(parts)
    deepest = pc.max(depth).as_py() or 0
    found = [pc.binary_join(pc.list_slice(pc.filter(parts, pc.greater(depth, level)), 0, level), "/")
             for level in range(1, deepest)]
    if not found:
        return pa.array([], pa.string())
    return pc.unique(pa.concat_arrays([a.cast(pa.string()) for a in found]))


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(repr(v) for v in values)


def _children_of(parent: str, paths: pa.Array) -> list[str]:
    below = pc.filter(paths, pc.starts_with(paths, parent + "/"))
    return below.slice(0, 1).to_pylist()


def batch_problems(paths: pa.Array) -> list[str]:
    """What is wrong with a batch's distinct partition paths, one line per kind; empty if nothing."""
    paths = paths.cast(pa.string())
    lines = []
    for rule in RULES:
        matches = pc.match_substring_regex(paths, rule.pattern)
        bad = pc.filter(paths, matches)
        if len(bad):
            lines.append(f"  {_quoted(bad.slice(0, _EXAMPLES).to_pylist())}"
                         f"{' and more' if len(bad) > _EXAMPLES else ''}: {rule.problem}; "
                         f"a new table can take such values with {rule.remedy}")
            paths = pc.filter(paths, pc.invert(matches))  # one complaint per path
    parents = pc.filter(paths, pc.is_in(paths, value_set=_ancestors(paths)))
    if len(parents):
        pairs = [f"{p!r} holds {_quoted(_children_of(p, paths))}" for p in parents.slice(0, _EXAMPLES).to_pylist()]
        lines.append(f"  {'; '.join(pairs)}: a partition cannot be the parent folder of another "
                     f"(readers would lose one of them); a new table can take such values with {_URLENCODE}")
    return lines


def nesting_problems(paths: pa.Array, existing: pa.Array) -> list[str]:
    """Where a batch's (well-formed) partition paths nest with the table's ``existing`` partitions
    (as its metadata table lists them)."""
    paths, existing = paths.cast(pa.string()), existing.cast(pa.string())
    lines = []
    above = pc.unique(pc.filter(existing, pc.is_in(existing, value_set=_ancestors(paths))))
    if len(above):
        lines.append(_existing_parents_line(above.to_pylist(), paths))
    below = pc.filter(paths, pc.is_in(paths, value_set=_ancestors(existing)))
    if len(below):
        pairs = [f"{p!r} holds the table's {_quoted(_children_of(p, existing))}"
                 for p in below.slice(0, _EXAMPLES).to_pylist()]
        lines.append(f"  {'; '.join(pairs)}: a partition cannot be the parent folder of another "
                     "(readers would lose one of them)")
    return lines


def table_problems(storage: Storage, paths: pa.Array) -> list[str]:
    """Where a batch's (well-formed) partition paths nest with the table's existing partitions,
    found by file-status calls where no metadata table lists them: an existing partition that is
    the parent folder of a new path, or a new path whose folder exists without being a partition
    (it holds partitions below it)."""
    paths = paths.cast(pa.string())
    lines = []
    found = sorted(_partitions_among(storage, _ancestors(paths).to_pylist()))
    if found:
        lines.append(_existing_parents_line(found, paths))
    names = paths.to_pylist()
    folders = [p for p, info in zip(names, _file_info(storage, names)) if info.type == pafs.FileType.Directory]
    if folders:
        marked = _partitions_among(storage, folders)
        holders = [p for p in folders if p not in marked]
        if holders:
            lines.append(f"  {_quoted(holders[:_EXAMPLES])}: the table has partitions inside this folder; "
                         "a partition cannot be the parent folder of another (readers would lose one of them)")
    return lines


def _existing_parents_line(parents: list[str], paths: pa.Array) -> str:
    """The complaint for partitions of the table that would be parent folders of ``paths``."""
    pairs = [f"{p!r} would hold {_quoted(_children_of(p, paths))}" for p in parents[:_EXAMPLES]]
    return (f"  {'; '.join(pairs)}: the table's partition would become the parent folder of "
            "another partition (readers would lose one of them)")


def _partitions_among(storage: Storage, folders: list[str]) -> set[str]:
    """The ``folders`` that are partitions: those holding a partition marker file, in any of its names."""
    probes = [(folder, f"{folder}/{name}") for folder in folders for name in _METAFILES]
    infos = _file_info(storage, [rel for _, rel in probes])
    return {folder for (folder, _), info in zip(probes, infos) if info.type == pafs.FileType.File}


def _file_info(storage: Storage, rels: list[str]) -> list[pafs.FileInfo]:
    return storage.fs.get_file_info([storage.full(r) for r in rels]) if rels else []


def check_partition_paths(paths: pa.Array, *, fields: Iterable[str], storage: Storage | None = None,
                          existing: Iterable[str] | None = None) -> None:
    """Raise :class:`HudiPartitionPathError` naming the partition paths among ``paths`` (a batch's
    distinct ones) that cannot be folders of the table at ``storage`` (None: a new table), whose
    partitions are ``existing`` when its metadata table lists them (None: ask storage)."""
    lines = batch_problems(paths)
    if not lines and existing is not None:
        lines = nesting_problems(paths, pa.array(sorted(existing), pa.string()))
    elif not lines and storage is not None:
        lines = table_problems(storage, paths)
    if lines:
        raise HudiPartitionPathError(
            f"partition paths made from hoodie.datasource.write.partitionpath.field={','.join(fields)} cannot be "
            "folders of the table:\n" + "\n".join(lines) + "\nnothing was written; filter or fix these values "
            "(an existing table keeps the urlencode and hive-style settings it was created with)")
