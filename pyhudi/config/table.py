"""Options of the table's identity, key generation and metadata table (most also persist in
``hoodie.properties``)."""

from __future__ import annotations

from typing import Any

from pyhudi.config.registry import (
    Unimplemented,
    choice,
    only_false,
    option,
    parse_bool,
    parse_fields,
    parse_float,
    parse_positive_int,
)

# ---------------------------------------------------------------------------------------------
# Table identity and layout (also persisted in hoodie.properties)
# ---------------------------------------------------------------------------------------------
TABLE_NAME = option(
    "hoodie.table.name", None, "Table name; required when a write creates the table.",
    aliases=("hoodie.datasource.write.table.name",))
DATABASE_NAME = option(
    "hoodie.database.name", None, "Database name recorded in hoodie.properties (part of the checksum).")
TABLE_TYPE = option(
    "hoodie.datasource.write.table.type", "COPY_ON_WRITE",
    "COPY_ON_WRITE or MERGE_ON_READ (Spark SQL short form type=cow|mor).",
    choice("COPY_ON_WRITE", "MERGE_ON_READ", mapping={"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}),
    aliases=("hoodie.table.type", "type", "tableType"))
OPERATION = option(
    "hoodie.datasource.write.operation", "upsert",
    "Write operation: upsert, insert, bulk_insert, delete; insert_overwrite (the batch replaces every "
    "partition it has records in), insert_overwrite_table (the batch replaces the table), delete_partition "
    "(the partitions of hoodie.datasource.write.partitions.to.delete, else the batch's, are emptied); "
    "upsert_prepped, insert_prepped, delete_prepped: rows that carry Hudi's _hoodie_record_key and "
    "_hoodie_partition_path (read from the table) written by those stored values, no key generated (an upsert "
    "or delete of such rows on a table with auto-generated keys is prepped too).",
    lambda v: choice("UPSERT", "INSERT", "BULK_INSERT", "DELETE", "INSERT_OVERWRITE",
                     "INSERT_OVERWRITE_TABLE", "DELETE_PARTITION", "UPSERT_PREPPED", "INSERT_PREPPED",
                     "DELETE_PREPPED")(v).lower())
PARTITIONS_TO_DELETE = option(
    "hoodie.datasource.write.partitions.to.delete", None,
    "delete_partition: comma-separated partition paths to empty, * matching any characters "
    "(2024-01-*); unset, the partitions of the batch's records.", parse_fields)
RECORDKEY_FIELD = option(
    "hoodie.datasource.write.recordkey.field", None,
    "Record key field(s), comma separated; nested fields as a.b. Unset (and not recorded by the table): Hudi "
    "0.14+'s auto-generated keys <instant>_<spark partition>_<row>, for insert, bulk_insert and the overwrite "
    "operations (an unset operation becomes bulk_insert).", parse_fields,
    aliases=("hoodie.table.recordkey.fields", "primaryKey"))
PARTITIONPATH_FIELD = option(
    "hoodie.datasource.write.partitionpath.field", None,
    "Partition path field(s), comma separated; unset or empty for a non-partitioned table. CustomKeyGenerator: "
    "each field with its type, field:SIMPLE or field:TIMESTAMP (the hoodie.keygen.timebased.* options).",
    parse_fields, aliases=("hoodie.table.partition.fields",))
PRECOMBINE_FIELD = option(
    "hoodie.datasource.write.precombine.field", "ts",
    "Ordering field: of two records with the same key the one with the larger value wins (Hudi 1.1 also "
    "takes it as hoodie.table.ordering.fields, the name table version 9 records it under).",
    aliases=("hoodie.table.precombine.field", "preCombineField", "hoodie.payload.ordering.field",
             "hoodie.table.ordering.fields"))
KEYGENERATOR_CLASS = option(
    "hoodie.datasource.write.keygenerator.class", None,
    "Key generator class; inferred from the key and partition fields when unset.",
    aliases=("hoodie.table.keygenerator.class",))
#: Hudi's ``KeyGeneratorType`` names pyhudi implements (each ``_AVRO`` twin keys records alike)
KEYGEN_TYPES = ("SIMPLE", "COMPLEX", "TIMESTAMP", "NON_PARTITION", "CUSTOM")
#: the other names of Hudi's ``KeyGeneratorType`` (Hudi 1.1)
HUDI_ONLY_KEYGEN_TYPES = ("GLOBAL_DELETE", "GLOBAL_DELETE_AVRO", "AUTO_RECORD",
                          "AUTO_RECORD_AVRO", "HOODIE_TABLE_METADATA", "SPARK_SQL", "SPARK_SQL_UUID",
                          "SPARK_SQL_MERGE_INTO", "USER_PROVIDED")


def _parse_keygen_type(value: Any) -> str:
    text = str(value).strip().upper()
    base = text[:-len("_AVRO")] if text.endswith("_AVRO") else text
    if base in KEYGEN_TYPES:
        return base
    if base == "AUTO_RECORD":
        raise Unimplemented(
            f"{text} names Hudi's AutoRecordGenWrapper{'Avro' if text != base else ''}KeyGenerator, which Hudi wraps "
            "around the table's key generator itself when no record key field is set "
            "(HoodieSparkKeyGeneratorFactory.createKeyGenerator); it is not a type to choose: its only constructor "
            "takes the key generator it wraps, so Hudi cannot build it from this option either. For "
            "auto-generated record keys leave hoodie.datasource.write.recordkey.field unset and name the partition "
            "path's key generator (SIMPLE, TIMESTAMP, CUSTOM, NON_PARTITION...) or none")
    if text in HUDI_ONLY_KEYGEN_TYPES:
        raise Unimplemented(f"pyhudi implements the key generator types {', '.join(KEYGEN_TYPES)} (and their _AVRO "
                            f"twins), not {text} (a key generator whose keys or partition paths it cannot reproduce)")
    raise ValueError(f"expected one of {', '.join(KEYGEN_TYPES + HUDI_ONLY_KEYGEN_TYPES)}, got {value!r}")


KEYGENERATOR_TYPE = option(
    "hoodie.datasource.write.keygenerator.type", None,
    "Key generator type (SIMPLE, COMPLEX, TIMESTAMP, NON_PARTITION, CUSTOM, or their _AVRO twins); the class wins "
    "when both are set. Hudi's other types (GLOBAL_DELETE, SPARK_SQL...) are not implemented; AUTO_RECORD is the "
    "wrapper Hudi applies itself when no record key field is set, refused as a choice (Hudi cannot build it).",
    _parse_keygen_type)
HIVE_STYLE_PARTITIONING = option(
    "hoodie.datasource.write.hive_style_partitioning", False,
    "Name partition folders field=value.", parse_bool)
PARTITIONPATH_URLENCODE = option(
    "hoodie.datasource.write.partitionpath.urlencode", False,
    "Escape partition values Hive-style (%XX) before building the path.", parse_bool)
DROP_PARTITION_COLUMNS = option(
    "hoodie.datasource.write.drop.partition.columns", False,
    "Drop partition columns from data files: not implemented (pyhudi's readers take partition values from "
    "the files), so only false is accepted.",
    only_false(hudi_does="leaves partition columns out of data files"))
POPULATE_META_FIELDS = option(
    "hoodie.populate.meta.fields", True,
    "Fill _hoodie_commit_time, _hoodie_commit_seqno, _hoodie_record_key and _hoodie_partition_path.",
    parse_bool)
CDC_ENABLED = option(
    "hoodie.table.cdc.enabled", False,
    "Change data capture (Hudi 0.13+, HoodieTableConfig.CDC_ENABLED): every write that rewrites a file group "
    "also writes the changes it made to it into a change data file (.cdc) beside it, for CDC queries. It is "
    "recorded in hoodie.properties when a write creates the table; a write to an existing table must agree "
    "with the table.", parse_bool)
CDC_LOGGING_MODE = option(
    "hoodie.table.cdc.supplemental.logging.mode", "DATA_BEFORE_AFTER",
    "What the change data files of a CDC table hold (HoodieCDCSupplementalLoggingMode): OP_KEY_ONLY (the "
    "operation and the record key), DATA_BEFORE (also the record before the change) or DATA_BEFORE_AFTER "
    "(operation, commit time, the record before and after). Hudi's lower-case names (op_key_only, data_before, "
    "data_before_after) are accepted; hoodie.properties records the upper-case name, as Hudi does.",
    choice("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER"))
COMPLEX_KEYGEN_NEW_ENCODING = option(
    "hoodie.write.complex.keygen.new.encoding", False,
    "ComplexKeyGenerator with one record key field: false writes _hoodie_record_key as field:value (Hudi 0.14.0 "
    "and earlier, 0.14.2, 0.15.1, 1.0.3 and 1.1 by default; 1.1 always for table version 9), true as the bare value "
    "(Hudi 0.14.1, 0.15.0 and 1.0.0-1.0.2, HUDI-7001). It decides for a new table; on a table with records pyhudi "
    "writes the encoding the stored keys have, and a value set here that contradicts them is refused while "
    "hoodie.write.complex.keygen.validation.enable is true.", parse_bool)
COMPLEX_KEYGEN_VALIDATION = option(
    "hoodie.write.complex.keygen.validation.enable", True,
    "ComplexKeyGenerator with one record key field: before writing to a table with records, read a stored "
    "_hoodie_record_key to learn whether the table keys field:value or the bare value, and refuse the write when "
    "that cannot be read or hoodie.write.complex.keygen.new.encoding says otherwise (so an upsert never misses the "
    "stored records and duplicates them). false skips the check and writes what "
    "hoodie.write.complex.keygen.new.encoding says.", parse_bool)
CONSISTENT_LOGICAL_TIMESTAMP = option(
    "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled", False,
    "Render timestamp/date key values as their logical value instead of the raw number.", parse_bool)
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
NON_DEFAULTS_PAYLOAD = "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload"
PARTIAL_UPDATE_PAYLOAD = "org.apache.hudi.common.model.PartialUpdateAvroPayload"
EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.EventTimeAvroPayload"
AWS_DMS_PAYLOAD = "org.apache.hudi.common.model.AWSDmsAvroPayload"
MYSQL_DEBEZIUM_PAYLOAD = "org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload"
POSTGRES_DEBEZIUM_PAYLOAD = "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload"
#: The payload classes whose merge pyhudi implements (:mod:`pyhudi.read.payloads`)
IMPLEMENTED_PAYLOADS = (OVERWRITE_PAYLOAD, DEFAULT_PAYLOAD, NON_DEFAULTS_PAYLOAD, PARTIAL_UPDATE_PAYLOAD,
                        EVENT_TIME_PAYLOAD, AWS_DMS_PAYLOAD, MYSQL_DEBEZIUM_PAYLOAD, POSTGRES_DEBEZIUM_PAYLOAD)
#: Other names of implemented payloads: hudi-spark's ``org.apache.hudi.payload.AWSDmsAvroPayload``
#: only extends the common one
PAYLOAD_ALIASES = {"org.apache.hudi.payload.AWSDmsAvroPayload": AWS_DMS_PAYLOAD}
#: ``hoodie.datasource.write.payload.type`` names (Hudi's ``RecordPayloadType``) of implemented payloads
PAYLOAD_OF_TYPE = {
    "OVERWRITE_LATEST_AVRO": OVERWRITE_PAYLOAD, "HOODIE_AVRO_DEFAULT": DEFAULT_PAYLOAD,
    "OVERWRITE_NON_DEF_LATEST_AVRO": NON_DEFAULTS_PAYLOAD, "PARTIAL_UPDATE_AVRO": PARTIAL_UPDATE_PAYLOAD,
    "EVENT_TIME_AVRO": EVENT_TIME_PAYLOAD, "AWS_DMS_AVRO": AWS_DMS_PAYLOAD,
    "MYSQL_DEBEZIUM_AVRO": MYSQL_DEBEZIUM_PAYLOAD, "POSTGRES_DEBEZIUM_AVRO": POSTGRES_DEBEZIUM_PAYLOAD}


def canonical_payload(name: str) -> str:
    """The implemented payload class ``name`` stands for (its alias resolved); a payload class
    pyhudi does not implement (a user's own, or another of Hudi's) is refused, naming it and the
    implemented ones, since merging its records by another rule would be silently wrong."""
    text = str(name).strip()
    text = PAYLOAD_ALIASES.get(text, text)
    if text not in IMPLEMENTED_PAYLOADS:
        raise Unimplemented(
            f"payload class {text!r} is not implemented: pyhudi merges records as "
            f"{', '.join(p.rsplit('.', 1)[1] for p in IMPLEMENTED_PAYLOADS)} do; use one of those "
            "(their full names are org.apache.hudi.common.model[.debezium].<name>) or Apache Hudi's own Spark bundle")
    return text


#: The payload class whose semantics a record merge mode (Hudi 1.x, table version 8 on) names.
PAYLOAD_OF_MERGE_MODE = {"COMMIT_TIME_ORDERING": OVERWRITE_PAYLOAD, "EVENT_TIME_ORDERING": DEFAULT_PAYLOAD}
#: The merge mode a table of version 8 on records for the payload class of the same semantics.
MERGE_MODE_OF_PAYLOAD = {payload: mode for mode, payload in PAYLOAD_OF_MERGE_MODE.items()}
PAYLOAD_CLASS = option(
    "hoodie.datasource.write.payload.class",
    OVERWRITE_PAYLOAD,
    "Merge semantics (Hudi's record payload class): OverwriteWithLatestAvroPayload (incoming wins), "
    "DefaultHoodieRecordPayload (the stored record wins when its ordering value is larger), "
    "OverwriteNonDefaultsWithLatestAvroPayload (null incoming fields keep the stored value), PartialUpdateAvroPayload "
    "(ordering-aware field merge), EventTimeAvroPayload, AWSDmsAvroPayload (Op='D' deletes), "
    "debezium.MySqlDebeziumAvroPayload and debezium.PostgresDebeziumAvroPayload (_change_operation_type='d' "
    "deletes); see pyhudi.read.payloads. Other classes are refused.",
    lambda v: _parse_payload(v),
    aliases=("hoodie.compaction.payload.class", "payloadClass"))
PAYLOAD_TYPE = option(
    "hoodie.datasource.write.payload.type", None,
    "Hudi's RecordPayloadType name of the payload class (OVERWRITE_LATEST_AVRO, HOODIE_AVRO_DEFAULT, "
    "OVERWRITE_NON_DEF_LATEST_AVRO, PARTIAL_UPDATE_AVRO, EVENT_TIME_AVRO, AWS_DMS_AVRO, MYSQL_DEBEZIUM_AVRO, "
    "POSTGRES_DEBEZIUM_AVRO); the payload class wins when both are set.",
    lambda v: _parse_payload_type(v),
    aliases=("hoodie.compaction.payload.type",))
PAYLOAD_DELETE_FIELD = option(
    "hoodie.payload.delete.field", None,
    "DefaultHoodieRecordPayload: the field whose value hoodie.payload.delete.marker marks a record as a delete "
    "(then _hoodie_is_deleted is not looked at, as in Hudi's DefaultHoodieRecordPayload.isDeleteRecord).")
PAYLOAD_DELETE_MARKER = option(
    "hoodie.payload.delete.marker", None,
    "DefaultHoodieRecordPayload: the value (compared as text) of hoodie.payload.delete.field that marks a delete.")
TIMELINE_TIMEZONE = option(
    "hoodie.table.timeline.timezone", "LOCAL",
    "Time zone of instant times: LOCAL or UTC.", choice("LOCAL", "UTC"))
METADATA_ENABLE = option(
    "hoodie.metadata.enable", True,
    "Keep the metadata table (.hoodie/metadata) and its files partition in step with every action, "
    "so readers and writers plan from it instead of listing storage. A write with false removes "
    "the metadata table of a table that has one.",
    parse_bool)
METADATA_COLUMN_STATS_ENABLE = option(
    "hoodie.metadata.index.column.stats.enable", False,
    "Keep the metadata table's column_stats partition: per base file and column, min, max, null "
    "count, value count and sizes (from the file's footer). A write without it removes the partition.",
    parse_bool)
METADATA_COLUMN_STATS_COLUMNS = option(
    "hoodie.metadata.index.column.stats.column.list", (),
    "Top-level columns whose statistics the column_stats partition keeps, comma-separated; empty (the "
    "default, as in Hudi 0.14) keeps every column, the meta fields included. Filters on other columns "
    "skip no file.", parse_fields)
METADATA_COLUMN_STATS_FILE_GROUPS = option(
    "hoodie.metadata.index.column.stats.file.group.count", 2,
    "File groups of the column_stats partition (records spread by the hash of their key).", parse_positive_int)
METADATA_PARTITION_STATS_ENABLE = option(
    "hoodie.metadata.index.partition.stats.enable", True,
    "On a partitioned table of version 8 or 9 whose column_stats partition is kept, also keep the "
    "metadata table's partition_stats partition, as Hudi 1.x does: per data partition and column the "
    "range and counts of the column over the partition's latest files, recomputed for every partition "
    "a commit writes to. Hudi 1.1 keeps it whenever column statistics are on; false keeps column "
    "statistics without it (and removes it). Tables of version 6 and non-partitioned tables have none.",
    parse_bool)
METADATA_PARTITION_STATS_FILE_GROUPS = option(
    "hoodie.metadata.index.partition.stats.file.group.count", 1,
    "File groups of the partition_stats partition (records spread by the hash of their key).",
    parse_positive_int)
METADATA_BLOOM_FILTER_ENABLE = option(
    "hoodie.metadata.index.bloom.filter.enable", False,
    "Keep the metadata table's bloom_filters partition: the bloom filter of every base file (as in its "
    "footer). A write without it removes the partition.", parse_bool)
METADATA_BLOOM_FILTER_FILE_GROUPS = option(
    "hoodie.metadata.index.bloom.filter.file.group.count", 4,
    "File groups of the bloom_filters partition (records spread by the hash of their key).", parse_positive_int)
METADATA_RECORD_INDEX_ENABLE = option(
    "hoodie.metadata.record.index.enable", False,
    "Keep the metadata table's record_index partition: the partition and file group of every record "
    "key, updated by every write. A key maps to one place, so it suits tables whose keys are unique "
    "across partitions (those of a global index), as in Hudi 0.14. hoodie.index.type=RECORD_INDEX keeps "
    "it whatever this says. A write without either removes the partition. In a snapshot query's options, "
    "true has filters that name record keys (=, IN) read only the file groups the index locates them in "
    "(with hoodie.enable.data.skipping on); "
    "set it only for tables that hold each key once (a global index, no duplicates inserted), since the "
    "index knows one place per key.", parse_bool)
METADATA_RECORD_INDEX_MIN_GROUPS = option(
    "hoodie.metadata.record.index.min.filegroup.count", 10,
    "Fewest file groups the record_index partition is created with.", parse_positive_int)
METADATA_RECORD_INDEX_MAX_GROUPS = option(
    "hoodie.metadata.record.index.max.filegroup.count", 10000,
    "Most file groups the record_index partition is created with.", parse_positive_int)
METADATA_RECORD_INDEX_MAX_GROUP_SIZE = option(
    "hoodie.metadata.record.index.max.filegroup.size", 1024 * 1024 * 1024,
    "Bytes a record_index file group is sized for (at 48 bytes per key) when the partition is created.",
    parse_positive_int)
METADATA_RECORD_INDEX_GROWTH = option(
    "hoodie.metadata.record.index.growth.factor", 2.0,
    "Growth of the table the record_index partition is sized for at creation (its file-group count is "
    "fixed then): keys x this factor.", parse_float)
METADATA_COMPACT_MAX_DELTA_COMMITS = option(
    "hoodie.metadata.compact.max.delta.commits", 10,
    "Compact the metadata table after this many delta commits.", parse_positive_int)

# ---------------------------------------------------------------------------------------------
# Timestamp-based key generator
# ---------------------------------------------------------------------------------------------
_TB = "hoodie.keygen.timebased."
_TB_OLD = "hoodie.deltastreamer.keygen.timebased."
TIMESTAMP_TYPE = option(
    _TB + "timestamp.type", None,
    "How the partition field is read: UNIX_TIMESTAMP, DATE_STRING, MIXED, EPOCHMILLISECONDS, "
    "EPOCHMICROSECONDS or SCALAR.",
    choice("UNIX_TIMESTAMP", "DATE_STRING", "MIXED", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "SCALAR"),
    aliases=(_TB_OLD + "timestamp.type",))
TIMESTAMP_SCALAR_UNIT = option(
    _TB + "timestamp.scalar.time.unit", "SECONDS", "Unit of SCALAR timestamps (java TimeUnit name).",
    choice("NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS"),
    aliases=(_TB_OLD + "timestamp.scalar.time.unit",))
TIMESTAMP_INPUT_FORMAT = option(
    _TB + "input.dateformat", "", "Input date format (Java pattern) for DATE_STRING/MIXED.",
    aliases=(_TB_OLD + "input.dateformat",))
TIMESTAMP_INPUT_FORMAT_DELIMITER = option(
    _TB + "input.dateformat.list.delimiter.regex", ",", "Separator of several input formats.",
    aliases=(_TB_OLD + "input.dateformat.list.delimiter.regex",))
TIMESTAMP_INPUT_TIMEZONE = option(
    _TB + "input.timezone", "UTC", "Time zone of input date strings without an offset.",
    aliases=(_TB_OLD + "input.timezone",))
TIMESTAMP_OUTPUT_FORMAT = option(
    _TB + "output.dateformat", "", "Output date format (Java pattern) of the partition path.",
    aliases=(_TB_OLD + "output.dateformat",))
TIMESTAMP_OUTPUT_TIMEZONE = option(
    _TB + "output.timezone", "UTC", "Time zone in which the partition path is rendered.",
    aliases=(_TB_OLD + "output.timezone",))
TIMESTAMP_TIMEZONE = option(
    _TB + "timezone", None, "Sets both input and output time zones when they are not set.",
    aliases=(_TB_OLD + "timezone",))


def _parse_payload(value: Any) -> str:
    return canonical_payload(str(value))


def _parse_payload_type(value: Any) -> str:
    text = str(value).strip().upper()
    if text not in PAYLOAD_OF_TYPE:
        raise Unimplemented(f"payload type {text!r} is not implemented; use one of {', '.join(PAYLOAD_OF_TYPE)}")
    return PAYLOAD_OF_TYPE[text]
