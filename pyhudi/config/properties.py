"""``.hoodie/hoodie.properties`` and ``.hoodie_partition_metadata``: Java properties files.

Both are written the way ``java.util.Properties.store`` writes them (two comment lines, escaped
``key=value`` lines) because Java readers parse them with that class; ``hoodie.table.checksum``
(CRC32 of ``database.table``, written last) lets readers detect a damaged or truncated file.

A table's config is only ever read whole and checked: a missing, empty, truncated or unparsable
``hoodie.properties`` with no valid ``hoodie.properties.backup`` is a
:class:`~pyhudi.errors.HudiTablePropertiesError`, never a guess. Updates follow Hudi's backup
protocol (:func:`update_table_config`), and writers finish an interrupted one under the table lock
(:func:`recover_table_config`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pyhudi.config import support
from pyhudi.config.support import (  # noqa: F401 -- keys and limits of hoodie.properties, named here too
    CDC_ENABLED,
    CDC_LOGGING_MODE,
    CDC_LOGGING_MODES,
    HIGHEST_TABLE_VERSION,
    LAYOUT_VERSION,
    MERGE_MODE,
    MERGE_PROPERTY_PREFIX,
    METADATA_PARTITIONS,
    ORDERING_FIELDS,
    PARTIAL_UPDATE_MODE,
    PAYLOAD_CLASS,
    TYPE,
    VERSION,
)
from pyhudi.errors import HudiTablePropertiesError, HudiUnsupportedError
from pyhudi.storage import Storage

log = logging.getLogger("pyhudi")

PROPERTIES_FILE = ".hoodie/hoodie.properties"
#: the previous config while an update of ``hoodie.properties`` is under way (or was interrupted)
BACKUP_FILE = ".hoodie/hoodie.properties.backup"
PARTITION_METAFILE = ".hoodie_partition_metadata"

NAME = "hoodie.table.name"
DATABASE = "hoodie.database.name"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
PARTITION_FIELDS = "hoodie.table.partition.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
KEYGEN_CLASS = "hoodie.table.keygenerator.class"
KEYGEN_TYPE = "hoodie.table.keygenerator.type"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
CREATE_SCHEMA = "hoodie.table.create.schema"
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
ARCHIVE_FOLDER = "hoodie.archivelog.folder"
TIMELINE_TIMEZONE = "hoodie.table.timeline.timezone"
CHECKSUM = "hoodie.table.checksum"
MULTIPLE_BASE_FORMATS = "hoodie.table.multiple.base.file.formats.enable"

#: the table version from which every Hudi table config carries ``hoodie.table.checksum``
CHECKSUM_SINCE_VERSION = 4
#: rounds of reading the config and its backup, and the pause between them (Hudi: 5 rounds, 1 s)
READ_ATTEMPTS = 3
READ_PAUSE_S = 0.2

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"


def java_date(moment: dt.datetime | None = None) -> str:
    """``java.util.Date.toString()`` form, used in the comment line of properties files."""
    moment = (moment or dt.datetime.now(dt.timezone.utc)).astimezone()
    return moment.strftime("%a %b %d %H:%M:%S ") + (moment.tzname() or "UTC") + moment.strftime(" %Y")


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04X}" if ord(ch) <= 0xFFFF else ch)
        else:
            out.append(ch)
    return "".join(out)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java properties file (comments, ``=``/``:`` separators, escapes, continuations)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # a line ending in an odd number of backslashes continues on the next line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key_end = None
        i = 0
        while i < len(line):
            if line[i] == "\\":
                i += 2
                continue
            if line[i] in "=: \t":
                key_end = i
                break
            i += 1
        if key_end is None:
            props[_unescape(line)] = ""
            continue
        key = line[:key_end]
        j = key_end
        while j < len(line) and line[j] in " \t":
            j += 1
        if j < len(line) and line[j] in "=:":
            j += 1
        while j < len(line) and line[j] in " \t":
            j += 1
        props[_unescape(key)] = _unescape(line[j:])
    return props


def format_properties(props: Mapping[str, str], *, comment: str = "Properties saved") -> str:
    now = dt.datetime.now(dt.timezone.utc)
    lines = [f"#{comment} on {now.strftime('%Y-%m-%dT%H:%M:%S.')}{now.microsecond // 1000:03d}Z",
             f"#{java_date(now)}"]
    lines += [f"{_escape(k, is_key=True)}={_escape(str(v), is_key=False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def table_checksum(props: Mapping[str, str]) -> str:
    """``hoodie.table.checksum``: unsigned CRC32 of ``"<database>.<table>"``."""
    return str(zlib.crc32(f"{props.get(DATABASE, '')}.{props[NAME]}".encode()))


def _flag(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def bare_partition_fields(raw: str) -> tuple[str, ...]:
    """The field names of a ``hoodie.table.partition.fields`` value, without the ``:TYPE``
    suffixes CustomKeyGenerator's tables record from version 8 on."""
    return tuple(f.split(":")[0].strip() for f in raw.split(",") if f.strip())


@dataclass(frozen=True)
class TableConfig:
    """The parsed ``hoodie.properties`` of a table."""

    props: Mapping[str, str]

    @property
    def name(self) -> str:
        return self.props[NAME]

    @property
    def table_type(self) -> str:
        return self.props.get(TYPE, "COPY_ON_WRITE").upper()

    @property
    def version(self) -> int:
        return int(self.props.get(VERSION, "6"))

    @property
    def layout_version(self) -> int:
        return int(self.props.get(LAYOUT_VERSION, "1" if self.version < 8 else "2"))

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        return tuple(f.strip() for f in self.props.get(RECORD_KEY_FIELDS, "").split(",") if f.strip())

    @property
    def partition_fields(self) -> tuple[str, ...]:
        """Partition fields, without the ``:TYPE`` suffix custom key generators add."""
        return bare_partition_fields(self.props.get(PARTITION_FIELDS, ""))

    @property
    def precombine_field(self) -> str | None:
        return self.props.get(PRECOMBINE_FIELD) or self.props.get(ORDERING_FIELDS) or None

    @property
    def merge_ordering_field(self) -> str | None:
        """The field(s) a read orders the records of one key by, comma-separated when several
        (compared left to right, as Hudi 1.x does; None: the later write wins).

        From version 8 the merge mode decides: COMMIT_TIME_ORDERING ignores the ordering field
        Hudi may still keep in the table config (``HoodieRecordUtils.getOrderingFieldNames``), so a
        later write wins even with a smaller value.
        """
        mode = self.props.get(MERGE_MODE, "").strip().upper()
        if self.version >= 8 and mode == "COMMIT_TIME_ORDERING" and not self.props.get(support.LEGACY_PAYLOAD_CLASS):
            return None
        fields = [f.strip() for f in (self.precombine_field or "").split(",") if f.strip()]
        return ",".join(fields) if fields else None

    @property
    def keygen_class(self) -> str | None:
        return self.props.get(KEYGEN_CLASS)

    @property
    def keygen_type(self) -> str | None:
        return self.props.get(KEYGEN_TYPE)

    @property
    def hive_style(self) -> bool:
        return _flag(self.props.get(HIVE_STYLE), False)

    @property
    def url_encode(self) -> bool:
        return _flag(self.props.get(URL_ENCODE), False)

    @property
    def populate_meta_fields(self) -> bool:
        return _flag(self.props.get(POPULATE_META_FIELDS), True)

    @property
    def cdc_enabled(self) -> bool:
        """``hoodie.table.cdc.enabled``: writes also write change data files (``HoodieTableConfig.isCDCEnabled``)."""
        return _flag(self.props.get(CDC_ENABLED), False)

    @property
    def cdc_logging_mode(self) -> str | None:
        """The supplemental logging mode of a CDC table (upper case, Hudi's default
        DATA_BEFORE_AFTER when unset: ``HoodieTableConfig.CDC_SUPPLEMENTAL_LOGGING_MODE``); None
        when the table has CDC off. A value that is no mode of Hudi's is an error."""
        if not self.cdc_enabled:
            return None
        mode = self.props.get(CDC_LOGGING_MODE, "DATA_BEFORE_AFTER").strip().upper()
        if mode not in CDC_LOGGING_MODES:
            raise HudiUnsupportedError(
                f"table {self.name} has {CDC_LOGGING_MODE}={self.props.get(CDC_LOGGING_MODE)}, none of Hudi's modes "
                f"({', '.join(CDC_LOGGING_MODES)}); correct hoodie.properties")
        return mode

    @property
    def base_file_format(self) -> str:
        return self.props.get(BASE_FILE_FORMAT, "PARQUET").upper()

    @property
    def timeline_timezone(self) -> str:
        return self.props.get(TIMELINE_TIMEZONE, "LOCAL").upper()

    @property
    def utc_timeline(self) -> bool:
        """Whether instant times are UTC (``hoodie.table.timeline.timezone=UTC``) rather than local."""
        return self.timeline_timezone == "UTC"

    @property
    def payload_class(self) -> str | None:
        """The payload class whose merge semantics records of this data table follow
        (:func:`~pyhudi.config.support.merge_semantics`: a merge mode of version 8 on stands for
        its payload); a merge pyhudi does not implement is an error, since merging its records by
        another rule would be silently wrong."""
        return support.merge_semantics(self.props, self.name)

    def check_data_table(self, *, merges: bool = True) -> None:
        """Fail, naming the feature, when this data table has files pyhudi cannot read right: base
        files of another format than parquet, or data files without their partition columns; with
        ``merges`` (writes), also a payload or merge mode pyhudi does not implement. A read checks
        that only where it merges log records (:meth:`payload_class`), so the base files of a table
        with another payload still read."""
        fmt = self.base_file_format
        if fmt != "PARQUET":
            raise HudiUnsupportedError(
                f"table {self.name} has {BASE_FILE_FORMAT}={fmt}: pyhudi reads and writes PARQUET base files "
                f"only, not {fmt}; use Apache Hudi's own Spark bundle for this table")
        if _flag(self.props.get(DROP_PARTITION_COLUMNS), False):
            raise HudiUnsupportedError(
                f"table {self.name} has {DROP_PARTITION_COLUMNS}=true (its data files lack the partition "
                "columns), which pyhudi does not implement; use Apache Hudi's own Spark bundle for this table")
        if merges:
            self.payload_class  # noqa: B018 -- raises for a merge pyhudi does not implement

    def check_writable(self, action: str, *, merges: bool = False) -> None:
        """Refuse ``action`` (a write or a table service, named in the error) before it writes a
        file when pyhudi does not write this table (:func:`~pyhudi.config.support.check_writable`)
        or cannot read its data files right (:meth:`check_data_table`; ``merges``: the action merges
        records, so the table's merge must be one pyhudi implements)."""
        support.check_writable(self.props, self.name, action)
        self.check_data_table(merges=merges)
        ordering = self.precombine_field or ""
        if merges and "," in ordering:
            key = PRECOMBINE_FIELD if self.props.get(PRECOMBINE_FIELD) else ORDERING_FIELDS
            raise HudiUnsupportedError(
                f"{action} refused: table {self.name} has {key}={ordering}: it orders records by several fields, "
                "which pyhudi merges when it reads the table but does not write with (its writes order by one "
                "field); nothing was written. Use Apache Hudi's own Spark bundle to write this table")

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        return tuple(p for p in self.props.get(METADATA_PARTITIONS, "").split(",") if p)

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)


def config_problem(props: Mapping[str, str]) -> str:
    """What makes parsed properties unusable as a table config ("" when they are usable).

    Hudi writes ``hoodie.table.checksum`` last, so a file cut short lacks it or has part of it;
    tables of version 4 and later always have one (Hudi 0.11 added it and its upgrade to version 4
    writes it), so only an older table may go without."""
    if not props:
        return "is empty"
    if NAME not in props:
        return f"has no {NAME}"
    stored = props.get(CHECKSUM)
    if stored is None:
        version = props.get(VERSION, "").strip()
        if version.isdigit() and int(version) < CHECKSUM_SINCE_VERSION:
            return ""
        return f"has no {CHECKSUM}, which Hudi writes last: the file is truncated"
    expected = table_checksum(props)
    if stored.strip() != expected:
        return (f"has {CHECKSUM}={stored}, but {NAME} and {DATABASE} give {expected}: the file is damaged "
                "or truncated")
    return ""


def _read_checked(storage: Storage, rel: str) -> tuple[dict[str, str] | None, bytes, str]:
    """(properties, raw bytes, "") when ``rel`` holds a usable table config, else (None, raw
    bytes, what is wrong)."""
    try:
        data = storage.read_bytes(rel)
    except FileNotFoundError:
        return None, b"", "does not exist"
    except OSError as exc:
        return None, b"", f"cannot be read ({exc})"
    props, problem = _checked(data)
    return props, data, problem


def _checked(data: bytes) -> tuple[dict[str, str] | None, str]:
    """(properties, "") when ``data`` is a usable table config, else (None, what is wrong); a
    commit reads the same ``hoodie.properties`` (data table's and metadata table's) a dozen times,
    so the last few contents are parsed once."""
    props, problem = _checked_text(data)
    return (None if props is None else dict(props)), problem


@functools.lru_cache(maxsize=16)
def _checked_text(data: bytes) -> tuple[Mapping[str, str] | None, str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "is not a text file"
    props = parse_properties(text)
    problem = config_problem(props)
    return (None, problem) if problem else (MappingProxyType(props), "")


def table_config_of(storage: Storage, data: bytes) -> TableConfig | None:
    """The config in ``data`` (the bytes of ``hoodie.properties`` read already), None when they
    are not a valid one (then :func:`load_table_config` knows what to do)."""
    props, _problem = _checked(data)
    return None if props is None else _known_version(storage, TableConfig(props))


def _unreadable(storage: Storage, problems: Mapping[str, str]) -> HudiTablePropertiesError:
    main, backup = problems[PROPERTIES_FILE], problems[BACKUP_FILE]
    text = f"{storage.full(PROPERTIES_FILE)} {main}"
    if backup == "does not exist":
        return HudiTablePropertiesError(
            f"{text}, and there is no {BACKUP_FILE}: the table's type, keys and partitioning are unknown, so "
            "pyhudi neither reads nor writes it. Restore .hoodie/hoodie.properties from a copy of the table "
            "(or rewrite it with the table's original settings); a write does not re-create it from its options")
    return HudiTablePropertiesError(
        f"{text}, and {storage.full(BACKUP_FILE)} {backup}. Check whether either file can be repaired "
        f"(the backup holds the settings before the last update of the table config), or restore "
        ".hoodie/hoodie.properties from a copy of the table; pyhudi neither reads nor writes the table until then")


def read_table_config(storage: Storage) -> TableConfig | None:
    """The table config from ``hoodie.properties`` when it is there and valid (one read); None
    when there is no ``hoodie.properties``. A damaged one is left to :func:`load_table_config`
    (the backup, the retries, the error), as if read by it.

    Opening a table asks this first: the common case costs one GET on an object store, where
    checking that the file exists before reading it costs two requests."""
    props, _data, problem = _read_checked(storage, PROPERTIES_FILE)
    if props is not None:
        return _known_version(storage, TableConfig(props))
    if problem == "does not exist":
        return None
    return load_table_config(storage)


def load_table_config(storage: Storage, *, attempts: int = READ_ATTEMPTS) -> TableConfig:
    """The table config, from ``hoodie.properties`` or, when that is missing or damaged, from a
    valid ``hoodie.properties.backup``.

    Reading the backup is what Hudi's readers do (``ConfigUtils.fetchConfigs``): a writer updating
    the config removes ``hoodie.properties`` after writing the backup and before writing the new
    file, so the backup is the table's config until the update ends, and after a crash in between
    until the next writer recovers it (:func:`recover_table_config`, under the table lock). Reading
    does not change any file. Both missing or damaged: :class:`HudiTablePropertiesError`, after
    ``attempts`` rounds, because another writer's update may be between two steps."""
    problems: dict[str, str] = {}
    for attempt in range(attempts):
        for rel in (PROPERTIES_FILE, BACKUP_FILE):
            props, _data, problems[rel] = _read_checked(storage, rel)
            if props is not None:
                if rel == BACKUP_FILE:
                    log.warning("%s %s; reading the table config from %s (the next write restores it)",
                                storage.full(PROPERTIES_FILE), problems[PROPERTIES_FILE], BACKUP_FILE)
                return _known_version(storage, TableConfig(props))
        if attempt + 1 < attempts:
            time.sleep(READ_PAUSE_S)
    raise _unreadable(storage, problems)


def _known_version(storage: Storage, config: TableConfig) -> TableConfig:
    """``config``, unless pyhudi cannot read its table right at all
    (:func:`~pyhudi.config.support.check_understood`: a table version it does not read, another
    timeline layout or table format...)."""
    support.check_understood(config.props, where=storage.full(PROPERTIES_FILE))
    return config


def recover_table_config(storage: Storage) -> bool:
    """Finish what an interrupted config update left, as Hudi's ``recoverIfNeeded`` does; call it
    holding the table lock. True when ``hoodie.properties`` was restored from the backup.

    * ``hoodie.properties`` valid: a leftover backup is deleted (the update it belonged to wrote
      the new file; Hudi deletes it too).
    * ``hoodie.properties`` missing or damaged and the backup valid: the backup's bytes become
      ``hoodie.properties``, checked, then the backup is deleted.
    * Neither valid: nothing is changed and nothing deleted (Hudi deletes both; pyhudi keeps them
      for the user to repair) and :class:`HudiTablePropertiesError` says so. No backup and no
      ``hoodie.properties`` at all (a new table) is not an error."""
    # without a backup there is nothing to delete or restore, whatever hoodie.properties holds:
    # one probe then, where reading hoodie.properties first would cost a request more per lock
    if not storage.exists(BACKUP_FILE):
        return False
    current, _data, _problem = _read_checked(storage, PROPERTIES_FILE)
    if current is not None:
        storage.discard(BACKUP_FILE)
        return False
    backup, data, _problem = _read_checked(storage, BACKUP_FILE)
    if backup is None:
        raise load_error(storage)
    storage.write_bytes(PROPERTIES_FILE, data)
    restored, _data, problem = _read_checked(storage, PROPERTIES_FILE)
    if restored != backup:
        raise HudiTablePropertiesError(
            f"restoring {storage.full(PROPERTIES_FILE)} from {BACKUP_FILE} failed (the copy {problem or 'differs'}); "
            f"{BACKUP_FILE} is kept: run again, or copy it to hoodie.properties by hand")
    storage.discard(BACKUP_FILE)
    log.warning("restored %s from %s (an update of the table config was interrupted)",
                storage.full(PROPERTIES_FILE), BACKUP_FILE)
    return True


def load_error(storage: Storage) -> HudiTablePropertiesError:
    """The error describing why neither ``hoodie.properties`` nor its backup can be used."""
    return _unreadable(storage, {rel: _read_checked(storage, rel)[2] for rel in (PROPERTIES_FILE, BACKUP_FILE)})


def store_table_config(storage: Storage, props: Mapping[str, str]) -> TableConfig:
    """Write hoodie.properties in one go, checksum last, as Java does: for a new table only
    (:func:`update_table_config` changes an existing one)."""
    ordered = {k: str(v) for k, v in props.items() if k != CHECKSUM}
    ordered[CHECKSUM] = table_checksum(ordered)
    storage.write_bytes(PROPERTIES_FILE, format_properties(ordered).encode("utf-8"))
    return TableConfig(ordered)


def update_table_config(storage: Storage, changes: Mapping[str, str | None]) -> TableConfig:
    """Change properties of an existing table (None: remove the key), holding the table lock, in
    the steps of Hudi's ``HoodieTableConfig.modify``, so that a reader or a crash at any point
    finds a valid config:

    1. recover from an earlier interrupted update (:func:`recover_table_config`);
    2. copy the current ``hoodie.properties`` to ``hoodie.properties.backup`` (a new file: an
       existing one means another update is under way);
    3. delete ``hoodie.properties`` (readers use the backup from now on);
    4. write the new ``hoodie.properties`` and read it back: a checksum that does not match
       deletes it again and fails, leaving the backup as the config;
    5. delete the backup."""
    recover_table_config(storage)
    current, data, _problem = _read_checked(storage, PROPERTIES_FILE)
    if current is None:
        raise load_error(storage)
    props = dict(current)
    for key, value in changes.items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    storage.create_new(BACKUP_FILE, data)
    storage.discard(PROPERTIES_FILE)
    updated = store_table_config(storage, props)
    written, _data, problem = _read_checked(storage, PROPERTIES_FILE)
    if written is None or written.get(CHECKSUM) != updated.props[CHECKSUM]:
        storage.discard(PROPERTIES_FILE)
        raise HudiTablePropertiesError(
            f"the new {storage.full(PROPERTIES_FILE)} {problem or 'has another checksum'} after writing it; it was "
            f"deleted and {BACKUP_FILE} holds the config until the next write restores it. Run again")
    storage.discard(BACKUP_FILE)
    return updated


def partition_depth(partition_path: str) -> int:
    return 0 if not partition_path else partition_path.count("/") + 1


def write_partition_metadata(storage: Storage, partition_path: str, instant: str) -> None:
    """Create ``.hoodie_partition_metadata`` in a partition unless it is already there."""
    rel = f"{partition_path}/{PARTITION_METAFILE}" if partition_path else PARTITION_METAFILE
    if storage.exists(rel):
        return
    text = (f"#partition metadata\n#{java_date()}\ncommitTime={instant}\n"
            f"partitionDepth={partition_depth(partition_path)}\n")
    storage.write_bytes(rel, text.encode("utf-8"))
