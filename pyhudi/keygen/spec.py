"""Which key generator a write uses and how it renders keys and partition paths.

Hudi writes ``_hoodie_record_key`` and ``_hoodie_partition_path`` into every record and names
partition folders after the latter, so pyhudi must produce byte-identical strings for the same
input or an upsert would not find the record a Hudi writer stored. The rules (Hudi 0.14.1/0.15):

* Simple: the key is the field value as a string; a null or empty key is an error. The partition
  is the value, ``__HIVE_DEFAULT_PARTITION__`` for null/empty, escaped when urlencode is on,
  prefixed ``field=`` when hive-style.
* Complex: ``f1:v1,f2:v2`` (``__null__``/``__empty__`` placeholders; an error only when every part
  is null/empty). A single key field is ``f:v`` or the bare value ``v``, as the table's stored keys
  are (:mod:`pyhudi.keygen.encoding`; HUDI-7001). Partitions join per-field parts with ``/``.
* Non-partitioned: partition path ``""``.
* Timestamp-based: the partition value read as a time (seconds, millis, scalar units or a date
  string) and formatted with ``output.dateformat``.
* Custom (``CustomKeyGenerator``/``CustomAvroKeyGenerator``): partition fields given as
  ``field:SIMPLE`` or ``field:TIMESTAMP``; each part is the simple or the timestamp-based rule for
  its one field (hive-style ``field=`` and urlencode per part), the parts joined with ``/``; the
  record key is the simple key (the bare value) for one field and the complex key
  (``f1:v1,f2:v2``) for several.
* Auto-generated keys (Hudi 0.14+, no record key field): ``<instant>_<spark partition>_<row>``
  (``HoodieRecord.generateSequenceId`` through ``AutoRecordGenWrapperKeyGenerator``), the partition
  path by the key generator the partition fields give.

Values render as Hudi's Avro path renders them: dates ``yyyy-MM-dd``, timestamps as epoch
microseconds unless ``consistent.logical.timestamp.enabled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import HudiConfigError, HudiUnsupportedError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"

_KEYGEN_PACKAGE = "org.apache.hudi.keygen."
SIMPLE = "SIMPLE"
COMPLEX = "COMPLEX"
NON_PARTITION = "NON_PARTITION"
TIMESTAMP = "TIMESTAMP"
CUSTOM = "CUSTOM"
#: the partition part types of CustomKeyGenerator (``CustomAvroKeyGenerator.PartitionKeyType``)
PART_TYPES = (SIMPLE, TIMESTAMP)

_CLASS_OF = {
    SIMPLE: _KEYGEN_PACKAGE + "SimpleKeyGenerator",
    COMPLEX: _KEYGEN_PACKAGE + "ComplexKeyGenerator",
    NON_PARTITION: _KEYGEN_PACKAGE + "NonpartitionedKeyGenerator",
    TIMESTAMP: _KEYGEN_PACKAGE + "TimestampBasedKeyGenerator",
    CUSTOM: _KEYGEN_PACKAGE + "CustomKeyGenerator",
}
_KIND_OF = {
    "SimpleKeyGenerator": SIMPLE, "SimpleAvroKeyGenerator": SIMPLE,
    "ComplexKeyGenerator": COMPLEX, "ComplexAvroKeyGenerator": COMPLEX,
    "NonpartitionedKeyGenerator": NON_PARTITION, "NonpartitionedAvroKeyGenerator": NON_PARTITION,
    "TimestampBasedKeyGenerator": TIMESTAMP, "TimestampBasedAvroKeyGenerator": TIMESTAMP,
    "CustomKeyGenerator": CUSTOM, "CustomAvroKeyGenerator": CUSTOM,
}

#: Characters ``PartitionPathEncodeUtils.escapePathName`` turns into ``%XX``.
_ESCAPED = set(chr(c) for c in range(0x20)) | set('"#%\'*/:=?\\\x7f{[]^')


def escape_partition_value(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


@dataclass(frozen=True)
class TimestampSpec:
    timestamp_type: str
    output_format: str
    input_formats: tuple[str, ...] = ()
    scalar_unit: str = "SECONDS"
    input_timezone: str | None = None
    output_timezone: str | None = None


@dataclass(frozen=True)
class KeyGenSpec:
    kind: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool = False
    url_encode: bool = False
    consistent_logical_timestamp: bool = False
    timestamp: TimestampSpec | None = None
    #: a ComplexKeyGenerator key of one field is ``field:value`` (else the bare value, HUDI-7001)
    field_prefixed: bool = True
    #: CustomKeyGenerator: the type of each partition field (SIMPLE or TIMESTAMP), in order
    partition_types: tuple[str, ...] = ()
    #: no record key field: keys are generated as ``<instant>_<spark partition>_<row>`` (Hudi 0.14+)
    auto_keys: bool = False

    @property
    def class_name(self) -> str:
        return _CLASS_OF[self.kind]

    def part_type(self, index: int) -> str:
        """How partition field ``index`` is rendered: SIMPLE or TIMESTAMP (a custom key generator
        says per field; the simple and complex ones render every field as SIMPLE)."""
        if self.kind == CUSTOM:
            return self.partition_types[index]
        return TIMESTAMP if self.kind == TIMESTAMP else SIMPLE

    @property
    def has_timestamp_part(self) -> bool:
        return any(self.part_type(i) == TIMESTAMP for i in range(len(self.partition_fields)))

    @property
    def is_partitioned(self) -> bool:
        return self.kind != NON_PARTITION and bool(self.partition_fields)

    @property
    def single_complex_key(self) -> bool:
        """Whether this is a ComplexKeyGenerator with one record key field, whose key encoding
        changed between Hudi releases (HUDI-7001)."""
        return self.kind == COMPLEX and len(self.record_key_fields) == 1


def missing_key_message(fields: tuple[str, ...]) -> str:
    """The refusal of rows without a record key: one field null or empty, or several all so."""
    if len(fields) == 1:
        return (f"record key field {fields[0]!r} is null or empty in some incoming rows; "
                "every record needs a key: filter or fill them before writing")
    return f"record key fields {', '.join(fields)} are all null or empty in some incoming rows"


def missing_ordering_message(field: str) -> str:
    """The refusal of rows without an ordering (precombine) value."""
    return (f"precombine field {field!r} (hoodie.datasource.write.precombine.field) is null in some incoming "
            "rows; every record needs an ordering value: fill it in, or write without a precombine field")


def kind_of_class(name: str, *, what: str = "key generator") -> str:
    """The kind of a key generator class (full or simple name); one pyhudi does not implement is
    refused, ``what`` naming where it was given (``key=`` for an option or property)."""
    short = name.rsplit(".", 1)[-1]
    if short not in _KIND_OF:
        named = what + name if what.endswith("=") else f"{what} {name}"
        raise HudiUnsupportedError(
            f"{named} is not supported: pyhudi implements SimpleKeyGenerator, ComplexKeyGenerator, "
            "NonpartitionedKeyGenerator, TimestampBasedKeyGenerator and CustomKeyGenerator (and their Avro twins), "
            "whose keys and "
            "partition paths it writes as Hudi does; write with Apache Hudi's own Spark bundle for this one")
    return _KIND_OF[short]


def _kind_from_type(name: str, *, what: str) -> str:
    try:
        return C.KEYGENERATOR_TYPE.parse(name)
    except HudiConfigError as exc:  # the option's message names the option: name the property instead
        raise HudiUnsupportedError(f"{what}={name} is not supported: pyhudi implements the key generator types "
                                   f"{', '.join(C.KEYGEN_TYPES)} (and their _AVRO twins); write with Apache "
                                   "Hudi's own Spark bundle for this one") from exc


def table_keygen_kind(props: Mapping[str, str]) -> str | None:
    """The key generator the table's records were keyed with: ``hoodie.table.keygenerator.class``
    when set, else ``hoodie.table.keygenerator.type`` (as Hudi resolves it); None when neither is
    recorded (Hudi infers it from the fields). One pyhudi does not implement is refused naming it."""
    klass = (props.get(P.KEYGEN_CLASS) or "").strip()
    if klass:
        return kind_of_class(klass, what=f"{P.KEYGEN_CLASS}=")
    ktype = (props.get(P.KEYGEN_TYPE) or "").strip()
    if ktype:
        return _kind_from_type(ktype, what=P.KEYGEN_TYPE)
    return None


def partition_values_in_paths(props: Mapping[str, str]) -> bool:
    """Whether the table's partition folders are named after its partition columns' values, so a
    filter on those columns can rule folders out by name: the simple and complex key generators
    (and no key generator recorded, with partition fields of no ``:TYPE`` suffix), and a custom one
    whose recorded fields are all ``:SIMPLE`` (Hudi 1.x records the types in
    ``hoodie.table.partition.fields`` from table version 8 on, ``HoodieTableConfigUtils``; a version
    6 table records bare names, so its types are unknown). A timestamp part, or an unknown key
    generator, names folders otherwise: no pruning by name, whatever it is."""
    entries = [f.strip() for f in (props.get(P.PARTITION_FIELDS) or "").split(",") if f.strip()]
    typed = [f.rpartition(":")[2].strip().upper() for f in entries if ":" in f]
    try:
        kind = table_keygen_kind(props)
    except HudiUnsupportedError:
        return False
    if kind == CUSTOM or typed:
        return bool(entries) and len(typed) == len(entries) and all(t == SIMPLE for t in typed)
    return kind in (None, SIMPLE, COMPLEX)


def parse_custom_fields(entries: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields and their types of CustomKeyGenerator's ``field:TYPE`` partition entries, refused
    as ``CustomAvroKeyGenerator.getPartitionKeyGenerators`` refuses them: an entry that is not one
    field and one type, a type other than SIMPLE or TIMESTAMP (matched case-insensitively)."""
    fields, types = [], []
    for entry in entries:
        parts = entry.split(":")
        if len(parts) != 2 or not parts[0].strip():
            raise HudiConfigError(
                f"{C.PARTITIONPATH_FIELD.key} entry {entry!r} is not field:TYPE: CustomKeyGenerator takes each "
                f"partition field with its type, e.g. region:SIMPLE,ts:TIMESTAMP (Hudi: 'Unable to find field names "
                "for partition path in proper format'). A table of version 6 records its partition fields without "
                "types: give this option with the types on every write to it, as Hudi requires")
        kind = parts[1].strip().upper()
        if kind not in PART_TYPES:
            raise HudiConfigError(
                f"{C.PARTITIONPATH_FIELD.key} entry {entry!r} has the partition type {parts[1].strip()!r}: "
                f"CustomKeyGenerator's types are {' and '.join(PART_TYPES)} (CustomAvroKeyGenerator.PartitionKeyType)")
        fields.append(parts[0].strip())
        types.append(kind)
    return tuple(fields), tuple(types)


def resolve_keygen(cfg: HudiConfig) -> KeyGenSpec:
    """The key generator a write uses, from its options (table properties already folded in).

    Without a record key field the keys are generated (``KeyGenUtils.isAutoGeneratedRecordKeysEnabled``)
    and the key generator inferred from the partition fields alone
    (``KeyGenUtils.inferKeyGeneratorTypeForAutoKeyGen``); partition fields with ``:TYPE`` suffixes
    and no key generator named infer CustomKeyGenerator (as Hudi 1.1's ``inferKeyGeneratorType``)."""
    key_fields = cfg.get(C.RECORDKEY_FIELD) or ()
    auto = not key_fields
    part_fields = cfg.get(C.PARTITIONPATH_FIELD) or ()
    klass = cfg.get(C.KEYGENERATOR_CLASS)
    if klass:
        kind = kind_of_class(klass)
    elif cfg.get(C.KEYGENERATOR_TYPE):
        kind = cfg.get(C.KEYGENERATOR_TYPE)  # the option's parser refuses the types pyhudi does not implement
    elif not part_fields:
        kind = NON_PARTITION
    elif any(":" in f for f in part_fields):
        kind = CUSTOM
    elif len(part_fields) == 1 and len(key_fields) <= 1:
        kind = SIMPLE
    else:
        kind = COMPLEX
    if kind == SIMPLE and (len(key_fields) > 1 or len(part_fields) > 1):
        raise HudiConfigError(
            "SimpleKeyGenerator takes one record key field and one partition field; "
            f"got {','.join(key_fields)} / {','.join(part_fields)}: use ComplexKeyGenerator")
    types: tuple[str, ...] = ()
    if kind == CUSTOM:
        part_fields, types = parse_custom_fields(tuple(part_fields))
    elif any(":" in f for f in part_fields):
        raise HudiConfigError(
            f"{C.PARTITIONPATH_FIELD.key}={','.join(part_fields)} gives partition types (field:TYPE), which only "
            f"CustomKeyGenerator takes, but the key generator is {_CLASS_OF[kind].rsplit('.', 1)[-1]}: set "
            f"{C.KEYGENERATOR_TYPE.key}=CUSTOM or name the fields without types")
    timestamp = None
    if kind == TIMESTAMP:
        if len(part_fields) != 1:
            raise HudiConfigError("TimestampBasedKeyGenerator takes exactly one partition field")
        timestamp = _timestamp_spec(cfg, "TimestampBasedKeyGenerator")
    elif TIMESTAMP in types:
        names = ", ".join(f for f, t in zip(part_fields, types) if t == TIMESTAMP)
        timestamp = _timestamp_spec(cfg, f"CustomKeyGenerator's TIMESTAMP partition field {names}")
    if kind == NON_PARTITION:
        part_fields = ()
    return KeyGenSpec(
        kind=kind, record_key_fields=tuple(key_fields), partition_fields=tuple(part_fields),
        hive_style=cfg.get(C.HIVE_STYLE_PARTITIONING), url_encode=cfg.get(C.PARTITIONPATH_URLENCODE),
        consistent_logical_timestamp=cfg.get(C.CONSISTENT_LOGICAL_TIMESTAMP), timestamp=timestamp,
        field_prefixed=not cfg.get(C.COMPLEX_KEYGEN_NEW_ENCODING), partition_types=types, auto_keys=auto)


def _timestamp_spec(cfg: HudiConfig, who: str) -> TimestampSpec:
    ttype = cfg.get(C.TIMESTAMP_TYPE)
    if not ttype:
        raise HudiConfigError(f"{who} needs {C.TIMESTAMP_TYPE.key}")
    out_fmt = cfg.get(C.TIMESTAMP_OUTPUT_FORMAT)
    if not out_fmt:
        raise HudiConfigError(f"{who} needs {C.TIMESTAMP_OUTPUT_FORMAT.key}")
    import re

    delimiter = (cfg.get(C.TIMESTAMP_INPUT_FORMAT_DELIMITER) or ",").strip() or ","
    inputs = tuple(f.strip() for f in re.split(delimiter, cfg.get(C.TIMESTAMP_INPUT_FORMAT) or "") if f.strip())
    if ttype in ("DATE_STRING", "MIXED") and not inputs:
        raise HudiConfigError(f"timestamp type {ttype} needs {C.TIMESTAMP_INPUT_FORMAT.key}")
    both = cfg.get(C.TIMESTAMP_TIMEZONE)
    in_tz = both or (cfg.get(C.TIMESTAMP_INPUT_TIMEZONE) if cfg.is_set(C.TIMESTAMP_INPUT_TIMEZONE) else None)
    out_tz = both or (cfg.get(C.TIMESTAMP_OUTPUT_TIMEZONE) if cfg.is_set(C.TIMESTAMP_OUTPUT_TIMEZONE) else None)
    return TimestampSpec(ttype, out_fmt, inputs, cfg.get(C.TIMESTAMP_SCALAR_UNIT), in_tz, out_tz)


def table_properties_of(spec: KeyGenSpec) -> dict[str, str]:
    """What hoodie.properties records about the key generator."""
    return {"hoodie.table.keygenerator.class": spec.class_name}
