"""What pyhudi understands of a table's ``hoodie.properties``, and the refusals of the rest.

A table property describes how the table's files are laid out or how its records merge. Where
pyhudi does not implement what a property says, going on would read or write the table wrongly
without a sign: a timeline in another folder reads as an empty table, a custom merger's records as
if the later write won. So each such property is refused with
:class:`~pyhudi.errors.HudiUnsupportedError` naming it, at the level where it matters:

* :func:`check_understood`, when any config is loaded (data table and metadata table, so every
  read, write, table service and CLI command): a table version pyhudi does not read, a timeline
  layout that does not go with the version, another table format, an unknown initial version, log
  files of another format, timeline folders other than Hudi's defaults, an unknown table type.
* :func:`merge_semantics`, wherever records of two writes are merged (writes, compaction,
  clustering, merge-on-read slices with log files): a merge mode, record merger strategy, payload
  class, partial-update mode or merge property pyhudi does not implement.
  A copy-on-write snapshot merges nothing when read, so it still reads.
* :func:`check_writable`, before a write or a table service writes a file: the table versions
  pyhudi writes, change data capture.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyhudi.config.table import (
    AWS_DMS_PAYLOAD,
    DEFAULT_PAYLOAD,
    IMPLEMENTED_PAYLOADS,
    MYSQL_DEBEZIUM_PAYLOAD,
    NON_DEFAULTS_PAYLOAD,
    OVERWRITE_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    PAYLOAD_ALIASES,
    PAYLOAD_OF_MERGE_MODE,
    POSTGRES_DEBEZIUM_PAYLOAD,
)
from pyhudi.errors import HudiUnsupportedError

VERSION = "hoodie.table.version"
LAYOUT_VERSION = "hoodie.timeline.layout.version"
TYPE = "hoodie.table.type"
TABLE_FORMAT = "hoodie.table.format"
INITIAL_VERSION = "hoodie.table.initial.version"
LOG_FILE_FORMAT = "hoodie.table.log.file.format"
TIMELINE_PATH = "hoodie.timeline.path"
HISTORY_PATH = "hoodie.timeline.history.path"
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
MERGE_MODE = "hoodie.record.merge.mode"
MERGE_STRATEGY = "hoodie.record.merge.strategy.id"
#: the name table version 6 gives the merge strategy
MERGE_STRATEGY_V6 = "hoodie.compaction.record.merger.strategy"
PARTIAL_UPDATE_MODE = "hoodie.table.partial.update.mode"
#: where table version 9 keeps the payload class a table had before (Hudi 1.1, RFC-97)
LEGACY_PAYLOAD_CLASS = "hoodie.table.legacy.payload.class"
MERGE_PROPERTY_PREFIX = "hoodie.record.merge.property."
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"
CDC_ENABLED = "hoodie.table.cdc.enabled"
CDC_LOGGING_MODE = "hoodie.table.cdc.supplemental.logging.mode"
#: ``HoodieCDCSupplementalLoggingMode`` names, as ``hoodie.properties`` records them (Hudi reads the
#: property upper-cased: ``HoodieTableConfig.cdcSupplementalLoggingMode``)
CDC_LOGGING_MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
#: where the index definitions of a table of version 8 on are kept (``.hoodie/.index_defs/index.json``)
INDEX_DEFS_PATH = "hoodie.table.index.defs.path"
#: the index definitions file Hudi 1.x and pyhudi write, when the property does not name one
INDEX_DEFS_FILE = ".hoodie/.index_defs/index.json"
#: metadata-table partitions of indexes users create (CREATE INDEX), which pyhudi does not maintain
USER_INDEX_PREFIXES = ("secondary_index_", "expr_index_")

#: Newest table version of Apache Hudi (1.1); a table claiming a later one has a format pyhudi cannot know.
HIGHEST_TABLE_VERSION = 9
#: table versions whose files pyhudi reads (Hudi 0.12/0.13, 0.14/0.15, 1.0, 1.1); 7 is the 0.16
#: bridge version, which no test table shows, and versions before 5 lay out their timeline otherwise
READ_VERSIONS = (5, 6, 8, 9)
#: table versions pyhudi writes to (a version 5 table gets the version 6 format, which it reads)
WRITE_VERSIONS = (5, 6, 8, 9)
#: ``hoodie.timeline.layout.version`` each readable table version has
LAYOUT_OF_VERSION = {5: 1, 6: 1, 8: 2, 9: 2}
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")

#: ``HoodieRecordMerger`` strategy ids: event-time ordering (in table version 6 the default merger,
#: which merges by the payload class), commit-time ordering, payload based
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
PAYLOAD_STRATEGY = "00000000-0000-0000-0000-000000000000"
_STRATEGY_OF_MODE = {"EVENT_TIME_ORDERING": EVENT_TIME_STRATEGY, "COMMIT_TIME_ORDERING": COMMIT_TIME_STRATEGY}

_USE_HUDI = "use Apache Hudi's own Spark bundle for this table"


def _version(props: Mapping[str, str]) -> int | None:
    text = props.get(VERSION, "6").strip()
    return int(text) if text.isdigit() else None


def check_understood(props: Mapping[str, str], *, where: str) -> None:
    """Refuse a config whose table pyhudi cannot read right at all; ``where`` names the file."""
    version = _version(props)
    if version not in READ_VERSIONS:
        raise HudiUnsupportedError(
            f"{where} says {VERSION}={props.get(VERSION)}, a table version pyhudi does not read (it reads versions "
            f"{', '.join(map(str, READ_VERSIONS))} and writes 6, 8 and 9); "
            + ("use the Apache Hudi release that wrote the table" if version is None or version > HIGHEST_TABLE_VERSION
               else "upgrade the table with Apache Hudi, or use the release that wrote it"))
    layout = props.get(LAYOUT_VERSION, "").strip()
    if layout and layout != str(LAYOUT_OF_VERSION[version]):
        raise HudiUnsupportedError(
            f"{where} says {LAYOUT_VERSION}={layout} for table version {version}, whose timeline has layout "
            f"{LAYOUT_OF_VERSION[version]}; pyhudi reads no other pairing; {_USE_HUDI}")
    table_type = props.get(TYPE, "COPY_ON_WRITE").strip().upper()
    if table_type not in TABLE_TYPES:
        raise HudiUnsupportedError(f"{where} says {TYPE}={props.get(TYPE)}: pyhudi knows only "
                                   f"{' and '.join(TABLE_TYPES)}; {_USE_HUDI}")
    fmt = props.get(TABLE_FORMAT, "native").strip()
    if fmt.lower() != "native":
        raise HudiUnsupportedError(
            f"{where} says {TABLE_FORMAT}={fmt}: the table keeps its timeline and files in a pluggable table "
            f"format, which pyhudi does not implement (it reads Hudi's native format); {_USE_HUDI}")
    initial = props.get(INITIAL_VERSION)
    if initial is not None and not (initial.strip().isdigit() and int(initial) <= HIGHEST_TABLE_VERSION):
        raise HudiUnsupportedError(
            f"{where} says {INITIAL_VERSION}={initial}: the table was created by a Hudi release pyhudi does not "
            f"know (the newest table version it knows is {HIGHEST_TABLE_VERSION}); {_USE_HUDI}")
    log_format = props.get(LOG_FILE_FORMAT, "HOODIE_LOG").strip()
    if log_format.upper() != "HOODIE_LOG":
        raise HudiUnsupportedError(
            f"{where} says {LOG_FILE_FORMAT}={log_format}: pyhudi reads and writes Hudi log files (HOODIE_LOG) "
            f"only; {_USE_HUDI}")
    for key, default in ((TIMELINE_PATH, "timeline"), (HISTORY_PATH, "history")):
        value = props.get(key, default).strip()
        if value != default:
            raise HudiUnsupportedError(
                f"{where} says {key}={value}: pyhudi reads the timeline of table versions 8 and 9 from Hudi's "
                f"default folder '{default}' only, so it would miss the instants kept there; {_USE_HUDI}")


def _short(payload: str) -> str:
    return payload.rsplit(".", 1)[1]


def _refuse_merge(name: str, what: str) -> HudiUnsupportedError:
    return HudiUnsupportedError(
        f"table {name} merges records with {what}, which pyhudi does not implement (it implements the payloads "
        f"{', '.join(_short(p) for p in IMPLEMENTED_PAYLOADS)}, the merge modes COMMIT_TIME_ORDERING and "
        f"EVENT_TIME_ORDERING, and the partial-update modes and merge properties table version 9 records for those "
        f"payloads); {_USE_HUDI}")


#: What Hudi 1.1 (RFC-97, table version 9) records beside ``hoodie.table.legacy.payload.class`` for
#: a payload whose merge is more than a merge mode: its partial-update mode. A table that says so
#: merges as the legacy payload did, which is what pyhudi implements.
_PARTIAL_MODE_OF_LEGACY = {
    NON_DEFAULTS_PAYLOAD: ("IGNORE_DEFAULTS",),
    PARTIAL_UPDATE_PAYLOAD: ("IGNORE_DEFAULTS", "KEEP_VALUES"),  # EightToNineUpgradeHandler: IGNORE_DEFAULTS
    POSTGRES_DEBEZIUM_PAYLOAD: ("IGNORE_MARKERS", "FILL_UNAVAILABLE"),
}
#: merge properties (``hoodie.record.merge.property.<name>``) table version 9 records for them
_MERGE_PROPERTIES_OF_LEGACY = {
    AWS_DMS_PAYLOAD: ("hoodie.payload.delete.field", "hoodie.payload.delete.marker", "delete.field", "delete.marker"),
    MYSQL_DEBEZIUM_PAYLOAD: ("hoodie.payload.delete.field", "hoodie.payload.delete.marker", "delete.field",
                             "delete.marker"),
    POSTGRES_DEBEZIUM_PAYLOAD: ("hoodie.payload.delete.field", "hoodie.payload.delete.marker", "delete.field",
                                "delete.marker", "hoodie.write.partial.update.custom.marker",
                                "hoodie.write.partial.update.unavailable.value"),
    DEFAULT_PAYLOAD: ("hoodie.payload.delete.field", "hoodie.payload.delete.marker", "delete.field", "delete.marker"),
}


def merge_semantics(props: Mapping[str, str], name: str) -> str | None:
    """The payload class whose merge semantics records of the data table ``name`` follow (None:
    Hudi's default for the table type, which the writer's options say).

    A record merge mode (table version 8 on) stands for the payload of the same semantics, and the
    merger strategy recorded with it must be that mode's. In table version 6 the strategy
    ``eeb8d96f-...`` is the default merger, which merges by the payload class. Table version 9
    keeps the payload a table had in ``hoodie.table.legacy.payload.class`` beside the merge mode,
    partial-update mode and merge properties Hudi 1.1 derives from it (RFC-97): such a table merges
    as that payload, which pyhudi implements. Anything else (the CUSTOM mode, another merger or
    payload, partial updates or merge properties of no implemented payload) would merge otherwise
    than pyhudi does: refused. Several ordering fields are compared left to right (Hudi 1.x)."""
    mode = props.get(MERGE_MODE, "").strip().upper()
    strategy_key = MERGE_STRATEGY if props.get(MERGE_STRATEGY) else MERGE_STRATEGY_V6
    strategy = (props.get(strategy_key) or "").strip()
    version = _version(props) or 6
    legacy = (props.get(LEGACY_PAYLOAD_CLASS) or "").strip()
    legacy = PAYLOAD_ALIASES.get(legacy, legacy)
    if legacy and legacy not in IMPLEMENTED_PAYLOADS:
        raise _refuse_merge(name, f"{LEGACY_PAYLOAD_CLASS}={legacy}")
    if mode:
        stored = props.get(PAYLOAD_CLASS)
        stored = PAYLOAD_ALIASES.get(stored, stored) if stored else stored
        payload = PAYLOAD_OF_MERGE_MODE.get(mode)
        if legacy:
            payload = legacy
        elif mode == "CUSTOM" and strategy == PAYLOAD_STRATEGY and stored in IMPLEMENTED_PAYLOADS:
            payload = stored  # version 8: a payload of its own merges by the payload-based merger
        elif payload is None:
            raise _refuse_merge(name, f"{MERGE_MODE}={mode}" + (f" with {PAYLOAD_CLASS}={stored}" if stored else ""))
        elif strategy and strategy != _STRATEGY_OF_MODE[mode]:
            raise _refuse_merge(name, f"{strategy_key}={strategy} (a record merger other than {mode}'s)")
    else:
        payload = props.get(PAYLOAD_CLASS)
        payload = PAYLOAD_ALIASES.get(payload, payload) if payload else payload
        implied = {EVENT_TIME_STRATEGY: DEFAULT_PAYLOAD, COMMIT_TIME_STRATEGY: OVERWRITE_PAYLOAD} \
            if version >= 8 else {}
        if strategy in implied:
            if payload not in (None, implied[strategy]):
                raise _refuse_merge(name, f"{strategy_key}={strategy} beside {PAYLOAD_CLASS}={payload} "
                                          "(a merger and a payload of different semantics)")
            payload = implied[strategy]
        elif strategy and strategy not in (EVENT_TIME_STRATEGY, PAYLOAD_STRATEGY):
            raise _refuse_merge(name, f"{strategy_key}={strategy} (a custom record merger)")
        if legacy:
            payload = legacy
        if payload is not None and payload not in IMPLEMENTED_PAYLOADS:
            raise _refuse_merge(name, f"{PAYLOAD_CLASS}={payload}")
    partial = props.get(PARTIAL_UPDATE_MODE, "NONE").strip().upper()
    if partial != "NONE" and partial not in _PARTIAL_MODE_OF_LEGACY.get(legacy, ()):
        raise _refuse_merge(name, f"{PARTIAL_UPDATE_MODE}={partial} (partial updates"
                                  + (f" of no payload it implements; {LEGACY_PAYLOAD_CLASS} is {legacy or 'unset'})"
                                     if partial else ")"))
    allowed = _MERGE_PROPERTIES_OF_LEGACY.get(legacy, ())
    merge_props = sorted(k for k in props if k.startswith(MERGE_PROPERTY_PREFIX)
                         and k[len(MERGE_PROPERTY_PREFIX):] not in allowed)
    if merge_props:
        raise _refuse_merge(name, f"{merge_props[0]}={props[merge_props[0]]} (a merge property)")
    return payload


def check_writable(props: Mapping[str, str], name: str, action: str) -> None:
    """Refuse ``action`` (a write or a table service) on a table pyhudi does not write: another
    table version than it writes, a change data capture table whose logging mode is none of Hudi's, or
    metadata-table indexes a user created that pyhudi does not maintain (secondary and expression
    indexes: writing on would leave them stale, dropping them would take the user's index away)."""
    version = _version(props)
    if version not in WRITE_VERSIONS:
        raise HudiUnsupportedError(
            f"{action} refused: table {name} has {VERSION}={props.get(VERSION)}, and pyhudi writes table versions "
            f"{', '.join(map(str, WRITE_VERSIONS))} (it reads version {version}); nothing was written. Write it with "
            "Apache Hudi of that version")
    indexes = [p for key in (METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT)
               for p in props.get(key, "").split(",") if p.strip().startswith(USER_INDEX_PREFIXES)]
    if indexes:
        raise HudiUnsupportedError(
            f"{action} refused: table {name} has the metadata-table index {indexes[0].strip()}, which pyhudi does not "
            "maintain (it keeps files, column_stats, bloom_filters, record_index and partition_stats); nothing was "
            f"written. Drop the index with Apache Hudi (DROP INDEX) to write with pyhudi, or {_USE_HUDI}")
    mode = props.get(CDC_LOGGING_MODE, "DATA_BEFORE_AFTER").strip().upper()
    if props.get(CDC_ENABLED, "false").strip().lower() == "true" and mode not in CDC_LOGGING_MODES:
        raise HudiUnsupportedError(
            f"{action} refused: table {name} has {CDC_ENABLED}=true with {CDC_LOGGING_MODE}="
            f"{props.get(CDC_LOGGING_MODE)}, which is none of Hudi's modes ({', '.join(CDC_LOGGING_MODES)}); "
            "nothing was written. Correct hoodie.properties")
