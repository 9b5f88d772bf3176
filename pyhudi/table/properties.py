"""``.hoodie/hoodie.properties`` and ``.hoodie_partition_metadata``: Java properties files.

Both are written the way ``java.util.Properties.store`` writes them (two comment lines, escaped
``key=value`` lines) because Java readers parse them with that class; ``hoodie.table.checksum``
(CRC32 of ``database.table``) lets Java detect a damaged properties file.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from pyhudi.errors import HudiCorruptFileError, HudiUnsupportedError
from pyhudi.storage import Storage

PROPERTIES_FILE = ".hoodie/hoodie.properties"
PARTITION_METAFILE = ".hoodie_partition_metadata"

NAME = "hoodie.table.name"
DATABASE = "hoodie.database.name"
TYPE = "hoodie.table.type"
VERSION = "hoodie.table.version"
LAYOUT_VERSION = "hoodie.timeline.layout.version"
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
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
CHECKSUM = "hoodie.table.checksum"
MERGE_MODE = "hoodie.record.merge.mode"
CDC_ENABLED = "hoodie.table.cdc.enabled"
MULTIPLE_BASE_FORMATS = "hoodie.table.multiple.base.file.formats.enable"

#: Newest table version of Apache Hudi (1.1); a table claiming a later one has a format pyhudi cannot know.
HIGHEST_TABLE_VERSION = 9
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
#: The payload class whose semantics a table's record merge mode (table version 8 on) names.
PAYLOAD_OF_MERGE_MODE = {"COMMIT_TIME_ORDERING": OVERWRITE_PAYLOAD, "EVENT_TIME_ORDERING": DEFAULT_PAYLOAD}

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
        raw = self.props.get(PARTITION_FIELDS, "")
        return tuple(f.split(":")[0].strip() for f in raw.split(",") if f.strip())

    @property
    def precombine_field(self) -> str | None:
        return self.props.get(PRECOMBINE_FIELD) or self.props.get("hoodie.table.ordering.fields") or None

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
        """The payload class whose merge semantics records of this data table follow.

        Tables of version 8 on name a record merge mode instead (COMMIT_TIME_ORDERING is
        OverwriteWithLatestAvroPayload, EVENT_TIME_ORDERING DefaultHoodieRecordPayload). Any other
        payload or mode is an error: merging its records by one of the two would be silently wrong.
        """
        mode = self.props.get(MERGE_MODE, "").strip().upper()
        payload = PAYLOAD_OF_MERGE_MODE.get(mode) if mode else self.props.get(PAYLOAD_CLASS)
        if (mode and payload is None) or payload not in (None, OVERWRITE_PAYLOAD, DEFAULT_PAYLOAD):
            what = f"{MERGE_MODE}={mode}" if mode else f"{PAYLOAD_CLASS}={payload}"
            raise HudiUnsupportedError(
                f"table {self.name} merges records with {what}, which pyhudi does not implement (it implements "
                "OverwriteWithLatestAvroPayload and DefaultHoodieRecordPayload, the merge modes "
                "COMMIT_TIME_ORDERING and EVENT_TIME_ORDERING); use Apache Hudi's own Spark bundle for this table")
        return payload

    def check_data_table(self) -> None:
        """Fail, naming the feature, when this data table has files pyhudi cannot read right: base
        files of another format than parquet, or data files without their partition columns."""
        fmt = self.base_file_format
        if fmt != "PARQUET":
            raise HudiUnsupportedError(
                f"table {self.name} has {BASE_FILE_FORMAT}={fmt}: pyhudi reads and writes PARQUET base files "
                f"only, not {fmt}; use Apache Hudi's own Spark bundle for this table")
        if _flag(self.props.get(DROP_PARTITION_COLUMNS), False):
            raise HudiUnsupportedError(
                f"table {self.name} has {DROP_PARTITION_COLUMNS}=true (its data files lack the partition "
                "columns), which pyhudi does not implement; use Apache Hudi's own Spark bundle for this table")
        self.payload_class  # noqa: B018 -- raises for a merge pyhudi does not implement

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        return tuple(p for p in self.props.get(METADATA_PARTITIONS, "").split(",") if p)

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)


def load_table_config(storage: Storage) -> TableConfig:
    try:
        text = storage.read_bytes(PROPERTIES_FILE).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HudiCorruptFileError(f"{storage.full(PROPERTIES_FILE)} is not UTF-8 text: {exc}") from None
    props = parse_properties(text)
    if NAME not in props:
        raise HudiCorruptFileError(
            f"{storage.full(PROPERTIES_FILE)} has no {NAME}; the file is damaged "
            "(restore it from hoodie.properties.backup if present)")
    version = props.get(VERSION, "6").strip()
    if not version.isdigit() or int(version) > HIGHEST_TABLE_VERSION:
        raise HudiUnsupportedError(
            f"{storage.full(PROPERTIES_FILE)} says {VERSION}={version}, a table version pyhudi does not know "
            f"(it reads versions up to {HIGHEST_TABLE_VERSION} and writes 6); use the Apache Hudi release "
            "that wrote the table")
    return TableConfig(props)


def store_table_config(storage: Storage, props: Mapping[str, str]) -> TableConfig:
    """Write hoodie.properties atomically, checksum last, as Java does."""
    ordered = {k: str(v) for k, v in props.items() if k != CHECKSUM}
    ordered[CHECKSUM] = table_checksum(ordered)
    storage.write_bytes(PROPERTIES_FILE, format_properties(ordered).encode("utf-8"))
    return TableConfig(ordered)


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
