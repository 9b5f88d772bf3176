"""The record key encoding of a ComplexKeyGenerator with one record key field (HUDI-7001).

With several key fields a complex key is ``f1:v1,f2:v2`` in every Hudi release. With one field it
depends on the writer: Hudi 0.14.0 and earlier write ``f:v``; 0.14.1, 0.15.0 and 1.0.0-1.0.2 the
bare ``v``; 0.14.2, 0.15.1, 1.0.3 and 1.1 write ``f:v`` unless
``hoodie.write.complex.keygen.new.encoding=true`` (table versions up to 8), and 1.1 always writes
``f:v`` for table version 9. A writer whose keys are encoded otherwise than the stored ones finds
none of them: its upserts insert duplicates and its deletes delete nothing.

Apache Hudi 1.1 therefore refuses every write to such a table of version 8 or below while
``hoodie.write.complex.keygen.validation.enable`` is true (its default), whatever the table holds,
and its later versions learn the encoding from a stored key. pyhudi does the latter on every write
to a table with records (:func:`resolve_encoding`): it reads one ``_hoodie_record_key`` that the
latest commits wrote (:func:`stored_key`: the footer of one base file, or one log data block)
and writes the same encoding; a table without records gets what ``new.encoding`` says (``f:v`` by
default, what Hudi 1.x writes and keeps on upgrade to version 9). With validation on, a stored key
that cannot be read, or a ``new.encoding`` given that contradicts the stored keys, is refused with
:class:`~pyhudi.errors.HudiTableMismatchError` before anything is written; with validation off,
``new.encoding`` is written as the user says (repairing a table is the user's call then).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiError, HudiInstantNotFoundError, HudiTableMismatchError
from pyhudi.io.avro_schema import COMMIT_TIME, RECORD_KEY
from pyhudi.io.base_file import MAX_KEY, MIN_KEY
from pyhudi.io.file_names import parse_log_file
from pyhudi.io.log_format import BlockType, data_block_records, read_log_file
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.storage import Storage
from pyhudi.table.table import HudiTable

log = logging.getLogger("pyhudi")

#: how many of the latest commits are searched for a stored key (Hudi searches 20 too): a table
#: whose latest commits wrote no data file must not turn a write into a scan of its timeline
MAX_COMMITS_SEARCHED = 20
_DATA_BLOCKS = (BlockType.AVRO_DATA_BLOCK, BlockType.PARQUET_DATA_BLOCK)
_DEPLOYMENT_GUIDE = "https://hudi.apache.org/docs/deployment#complex-key-generator"


@dataclass(frozen=True)
class StoredKey:
    """A ``_hoodie_record_key`` as a commit stored it, and the file it was read from."""

    key: str
    path: str
    instant: str

    def prefixed(self, field: str) -> bool:
        """Whether the key is ``field:value`` rather than the bare value."""
        return self.key.startswith(field + ":")


def _base_file_key(storage: Storage, path: str, instant: str, field: str) -> str | None:
    """A key of the base file: its footer's smallest key when its smallest and largest key are
    encoded alike (the footer alone is read: Hudi's writers record both), else the key of a record
    ``instant`` wrote into it, else of its newest record (a compaction or clustering keeps the
    records' commit times)."""
    with storage.fs.open_input_file(storage.full(path)) as f:
        parquet = pq.ParquetFile(f)
        footer = parquet.metadata.metadata or {}
        low, high = footer.get(MIN_KEY.encode()), footer.get(MAX_KEY.encode())
        if low is not None and high is not None:
            prefix = (field + ":").encode()
            if low.startswith(prefix) == high.startswith(prefix):
                return low.decode()
        rows = parquet.read(columns=[COMMIT_TIME, RECORD_KEY])
    rows = rows.filter(pc.is_valid(rows.column(RECORD_KEY)))
    if rows.num_rows == 0:
        return None
    own = rows.filter(pc.equal(rows.column(COMMIT_TIME), instant))
    if own.num_rows:
        return str(own.column(RECORD_KEY)[0].as_py())
    newest = pc.sort_indices(rows, sort_keys=[(COMMIT_TIME, "descending")])[0].as_py()
    return str(rows.column(RECORD_KEY)[newest].as_py())


def _log_file_key(storage: Storage, path: str, instant: str) -> str | None:
    """The first key of the data block ``instant`` appended to the log file, else of its last data block."""
    blocks = [b for b in read_log_file(storage, path) if b.block_type in _DATA_BLOCKS]
    if not blocks:
        return None
    chosen = next((b for b in blocks if b.instant_time == instant), blocks[-1])
    rows = data_block_records(chosen, source=storage.full(path))
    if RECORD_KEY not in rows.column_names or rows.num_rows == 0:
        return None
    keys = rows.column(RECORD_KEY).drop_null()
    return str(keys[0].as_py()) if len(keys) else None


def _key_in(storage: Storage, path: str, instant: str, field: str) -> str | None:
    """A key the file holds, None when it holds none or cannot be read (deleted by a cleaner since,
    damaged): one unreadable file leaves the question to the next one."""
    name = path.rsplit("/", 1)[-1]
    try:
        if parse_log_file(name) is not None:
            return _log_file_key(storage, path, instant)
        if name.endswith(".parquet"):
            return _base_file_key(storage, path, instant, field)
    except (OSError, HudiError, pa.ArrowException) as exc:
        log.info("no record key read from %s to learn the key encoding (%s)", path, exc)
    return None


def stored_key(table: HudiTable, field: str) -> StoredKey | None:
    """A record key the table's latest commits stored (``field``: its one record key field): the
    first readable one, searching their written files newest commit first (base files of a commit
    before its log files); None when none of the last :data:`MAX_COMMITS_SEARCHED` commits left one."""
    for inst in reversed(table.timeline.completed_writes()[-MAX_COMMITS_SEARCHED:]):
        try:
            stats = table.timeline.commit_metadata(inst).write_stats()
        except HudiInstantNotFoundError:  # archived meanwhile, and all before it
            break
        paths = [s.path for s in stats if s.path and not s.is_log] + [s.path for s in stats if s.path and s.is_log]
        for path in paths:
            key = _key_in(table.storage, path, inst.timestamp, field)
            if key is not None:
                return StoredKey(key, path, inst.timestamp)
    return None


def _encoding(prefixed: bool, field: str) -> str:
    return f"'{field}:<value>' (hoodie.write.complex.keygen.new.encoding=false)" if prefixed else \
        "'<value>' without the field name (hoodie.write.complex.keygen.new.encoding=true)"


def resolve_encoding(table: HudiTable | None, spec: KeyGenSpec, cfg: HudiConfig) -> KeyGenSpec:
    """``spec`` keying a single-field ComplexKeyGenerator's records as ``table`` stores them (see
    the module docstring); other key generators, and tables without stored keys, as they are."""
    if not spec.single_complex_key or table is None or not table.config.populate_meta_fields:
        return spec
    field = spec.record_key_fields[0]
    if table.config.version >= 9:  # Hudi 1.1 writes field:value into version 9 tables, always
        return dataclasses.replace(spec, field_prefixed=True)
    if not table.timeline.completed_writes():
        return spec
    declared, explicit = spec.field_prefixed, cfg.is_set(C.COMPLEX_KEYGEN_NEW_ENCODING)
    validate = cfg.get(C.COMPLEX_KEYGEN_VALIDATION)
    found = stored_key(table, field)
    if found is None:
        if not validate:
            return spec
        raise HudiTableMismatchError(
            f"{table.path} uses ComplexKeyGenerator with one record key field ({field}), whose _hoodie_record_key "
            "was written as 'field:value' by some Hudi releases and as the bare value by others (HUDI-7001), and "
            f"none of its last {MAX_COMMITS_SEARCHED} commits left a readable record key to tell which: a write "
            "keyed the other way would duplicate every record it upserts. Nothing was written. Look at the table's "
            f"_hoodie_record_key values (see {_DEPLOYMENT_GUIDE}), then write with "
            f"{C.COMPLEX_KEYGEN_VALIDATION.key}=false and {C.COMPLEX_KEYGEN_NEW_ENCODING.key} set to match them")
    prefixed = found.prefixed(field)
    if explicit and prefixed != declared:
        if validate:
            raise HudiTableMismatchError(
                f"{C.COMPLEX_KEYGEN_NEW_ENCODING.key}={str(not declared).lower()} keys records as "
                f"{_encoding(declared, field)}, but {table.path} stores them as {_encoding(prefixed, field)}: "
                f"commit {found.instant} wrote {found.key!r} into {found.path} (HUDI-7001). Its upserts would find "
                f"none of the stored records and duplicate them; nothing was written. Remove the option (pyhudi then "
                f"writes what the table holds), or set {C.COMPLEX_KEYGEN_VALIDATION.key}=false if the table is "
                f"being repaired to the new encoding ({_DEPLOYMENT_GUIDE})")
        log.warning("%s stores complex keys as %s (%r in %s), and this write keys its records as %s because %s=false: "
                    "they will not match the stored records", table.path, _encoding(prefixed, field), found.key,
                    found.path, _encoding(declared, field), C.COMPLEX_KEYGEN_VALIDATION.key)
        return spec
    if prefixed != declared:
        log.info("%s stores complex keys as %s (%r in %s): writing the same", table.path, _encoding(prefixed, field),
                 found.key, found.path)
    return dataclasses.replace(spec, field_prefixed=prefixed)
