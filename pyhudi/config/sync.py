"""Catalog sync options: the Hive metastore and AWS Glue, as Hudi's ``HiveSyncTool`` and
``AwsGlueCatalogSyncTool`` read them (docs/catalog-sync.md §1 has each key's source).

Every key of Hudi's sync tools is declared here, with Hudi's default. Settings that would make the
catalog hold something pyhudi does not write (JDBC or HiveQL execution, bucket specs, Glue
partition indexes, DataHub) are refused; settings that only steer how Hudi's JVM tool parallelises
its own calls are accepted without effect and say so.
"""

from __future__ import annotations

from typing import Any

from pyhudi.config.registry import (
    Unimplemented,
    choice,
    class_choice,
    only,
    only_false,
    option,
    parse_bool,
    parse_fields,
    parse_positive_int,
    parse_str,
)

HIVE_SYNC_TOOL = "org.apache.hudi.hive.HiveSyncTool"
GLUE_SYNC_TOOL = "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"
_TOOLS = {"HiveSyncTool": HIVE_SYNC_TOOL, "AwsGlueCatalogSyncTool": GLUE_SYNC_TOOL}
_OTHER_TOOLS = ("DataHubSyncTool", "BigQuerySyncTool", "AdbSyncTool", "GlobalHiveSyncTool")

EXTRACTORS = (
    "org.apache.hudi.hive.MultiPartKeysValueExtractor",
    "org.apache.hudi.hive.HiveStylePartitionValueExtractor",
    "org.apache.hudi.hive.SinglePartPartitionValueExtractor",
    "org.apache.hudi.hive.SlashEncodedDayPartitionValueExtractor",
    "org.apache.hudi.hive.NonPartitionedExtractor",
)


def parse_tools(value: Any) -> tuple[str, ...]:
    """The sync tool classes of ``hoodie.meta.sync.client.tool.class``: Hive and Glue, by full or
    simple name, comma-separated."""
    tools = []
    for name in parse_fields(value):
        simple = name.rsplit(".", 1)[-1]
        if simple in _TOOLS:
            tools.append(_TOOLS[simple])
        elif simple in _OTHER_TOOLS:
            raise Unimplemented(f"pyhudi syncs to the Hive metastore (HiveSyncTool) and AWS Glue "
                                f"(AwsGlueCatalogSyncTool), not with {name}")
        else:
            raise ValueError(f"{name!r} is not a Hudi sync tool class; use {HIVE_SYNC_TOOL} or {GLUE_SYNC_TOOL}")
    if not tools:
        raise ValueError("no sync tool class given")
    return tuple(dict.fromkeys(tools))


def parse_properties(value: Any) -> dict[str, str]:
    """Hudi's ``k1=v1`` lines (``table_properties``, ``serde_properties``): newline separated; a
    mapping is taken as it is."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    out = {}
    for line in str(value).splitlines():
        if not line.strip():
            continue
        key, sep, val = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected lines of key=value, got {line!r}")
        out[key.strip()] = val.strip()
    return out


def _refused(what: str) -> Any:
    """A parser refusing every value of an option whose feature pyhudi does not implement."""
    def parse(value: Any) -> str:
        raise Unimplemented(f"pyhudi does not implement {what}")

    return parse


META_SYNC_ENABLE = option(
    "hoodie.datasource.meta.sync.enable", False,
    "Sync the table to the catalogs of hoodie.meta.sync.client.tool.class after every write (the write "
    "is committed first; a failed sync is reported in the write's result and caught up by the next sync).",
    parse_bool, aliases=("hoodie.meta.sync.enable",))
HIVE_SYNC_ENABLE = option(
    "hoodie.datasource.hive_sync.enable", False,
    "Legacy switch of the Spark writer: true also turns on hoodie.datasource.meta.sync.enable.",
    parse_bool)
SYNC_TOOLS = option(
    "hoodie.meta.sync.client.tool.class", (HIVE_SYNC_TOOL,),
    "Comma-separated sync tools: org.apache.hudi.hive.HiveSyncTool (Hive metastore) and/or "
    "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool (AWS Glue).",
    parse_tools, aliases=("hoodie.meta.sync.classes",))
SYNC_MODE = option(
    "hoodie.datasource.hive_sync.mode", None,
    "How HiveSyncTool reaches Hive: hms (the metastore's thrift API, pyhudi's way whatever is unset) or glue "
    "(adds AwsGlueCatalogSyncTool, as Hudi's Spark writer does).",
    only("hms", "glue", hudi_accepts="jdbc and hiveql, through HiveServer2"))
USE_JDBC = option(
    "hoodie.datasource.hive_sync.use_jdbc", None,
    "Deprecated in Hudi; pyhudi talks to the metastore (mode hms), so only false is accepted when set.",
    only_false(hudi_does="runs DDL through HiveServer2's JDBC endpoint"))
METASTORE_URIS = option(
    "hoodie.datasource.hive_sync.metastore.uris", "thrift://localhost:9083",
    "The Hive metastore's thrift URI(s), comma-separated, as hive.metastore.uris.", parse_str)
SYNC_DATABASE = option(
    "hoodie.datasource.hive_sync.database", "default",
    "Catalog database (inferred from hoodie.database.name when that is set).", parse_str)
SYNC_TABLE = option(
    "hoodie.datasource.hive_sync.table", None,
    "Catalog table name (inferred from the table's hoodie.table.name).", parse_str)
SYNC_BASE_FILE_FORMAT = option(
    "hoodie.datasource.hive_sync.base_file_format", "PARQUET",
    "Format of the registered base files: PARQUET, as pyhudi writes.",
    only("PARQUET", hudi_accepts="ORC and HFILE"))
PARTITION_FIELDS = option(
    "hoodie.datasource.hive_sync.partition_fields", None,
    "Catalog partition columns (inferred from the table's partition fields).", parse_fields)
PARTITION_EXTRACTOR = option(
    "hoodie.datasource.hive_sync.partition_extractor_class", None,
    "How partition paths become catalog values (inferred as Hudi infers it from the partition fields and "
    "hive-style partitioning).",
    class_choice("partition value extractor", EXTRACTORS))
DECODE_PARTITION = option(
    "hoodie.meta.sync.decode_partition", None,
    "URL-decode partition values before registering them (inferred from "
    "hoodie.datasource.write.partitionpath.urlencode).", parse_bool)
SKIP_RO_SUFFIX = option(
    "hoodie.datasource.hive_sync.skip_ro_suffix", False,
    "Merge-on-read: name the read-optimized table t instead of t_ro.", parse_bool)
SUPPORT_TIMESTAMP = option(
    "hoodie.datasource.hive_sync.support_timestamp", False,
    "Register timestamp columns as Hive timestamp rather than bigint.", parse_bool)
TABLE_PROPERTIES = option(
    "hoodie.datasource.hive_sync.table_properties", None,
    "Extra table properties, lines of key=value.", parse_properties)
SERDE_PROPERTIES = option(
    "hoodie.datasource.hive_sync.serde_properties", None,
    "Extra serde properties, lines of key=value.", parse_properties)
SYNC_AS_DATASOURCE = option(
    "hoodie.datasource.hive_sync.sync_as_datasource", True,
    "Register the Spark data source properties (spark.sql.sources.provider=hudi and the schema), so Spark "
    "reads the table through the hudi source.", parse_bool)
SCHEMA_STRING_THRESHOLD = option(
    "hoodie.datasource.hive_sync.schema_string_length_thresh", 4000,
    "Length of each spark.sql.sources.schema.part.N chunk.", parse_positive_int)
CREATE_MANAGED_TABLE = option(
    "hoodie.datasource.hive_sync.create_managed_table", False,
    "Register a managed table (no EXTERNAL=TRUE).", parse_bool)
OMIT_METADATA_FIELDS = option(
    "hoodie.datasource.hive_sync.omit_metadata_fields", False,
    "Leave the _hoodie_* columns out of the registered schema.", parse_bool)
AUTO_CREATE_DATABASE = option(
    "hoodie.datasource.hive_sync.auto_create_database", True,
    "Create the catalog database when it is missing.", parse_bool)
IGNORE_EXCEPTIONS = option(
    "hoodie.datasource.hive_sync.ignore_exceptions", False,
    "pyhudi never fails a committed write because its sync failed (the failure is in the write's result "
    "and the log); true also keeps it out of the log's warnings.", parse_bool)
BATCH_NUM = option(
    "hoodie.datasource.hive_sync.batch_num", 1000,
    "Partitions per metastore call.", parse_positive_int)
TABLE_STRATEGY = option(
    "hoodie.datasource.hive_sync.table.strategy", "ALL",
    "Merge-on-read: which tables to register: RO (read-optimized as t), RT (snapshot as t) or ALL "
    "(t_ro and t_rt, and t as snapshot with hoodie.meta.sync.sync_snapshot_with_table_name).",
    choice("RO", "RT", "ALL"))
SNAPSHOT_WITH_TABLE_NAME = option(
    "hoodie.meta.sync.sync_snapshot_with_table_name", True,
    "Merge-on-read with strategy ALL: also register the snapshot table under the bare name t (not when "
    "skip_ro_suffix gives t to the read-optimized table).", parse_bool)
INCREMENTAL_SYNC = option(
    "hoodie.meta.sync.incremental", True,
    "Derive partition changes from the instants since the last sync; false compares every partition.",
    parse_bool)
NO_PARTITION_METADATA = option(
    "hoodie.meta.sync.no_partition_metadata", False,
    "Register no partitions (engines that list them from the metadata table).", parse_bool)
CONDITIONAL_SYNC = option(
    "hoodie.datasource.meta_sync.condition.sync", False,
    "Write last_commit_time_sync only when the schema, properties or partitions changed: a commit that "
    "changes nothing in the catalog then makes no catalog write.", parse_bool)
SPARK_VERSION = option(
    "hoodie.meta_sync.spark.version", None,
    "Recorded as spark.sql.create.version (the Spark writer sets the running version).", parse_str)
RECREATE_ON_ERROR = option(
    "hoodie.datasource.hive_sync.recreate_table_on_error", False,
    "When a sync of an existing table fails, drop and re-register it once, partitions included.",
    parse_bool, aliases=("hoodie.datasource.meta.sync.glue.recreate_table_on_error",))
GLUE_SKIP_ARCHIVE = option(
    "hoodie.datasource.meta.sync.glue.skip_table_archive", True,
    "Glue: update the table without keeping its previous version (SkipArchive).", parse_bool)
GLUE_METADATA_LISTING = option(
    "hoodie.datasource.meta.sync.glue.metadata_file_listing", False,
    "Glue: recorded as the table parameter hudi.metadata-listing-enabled (Athena reads it).", parse_bool)
JDBC_URL = option(
    "hoodie.datasource.hive_sync.jdbcurl", None,
    "The HiveServer2 URL of Hudi's JDBC mode, which pyhudi does not implement: accepted only with "
    "hoodie.datasource.hive_sync.mode=hms (then unused); without a mode Hudi would use it, so it is refused.",
    parse_str)
GLUE_CATALOG_ID = option(
    "hoodie.datasource.meta.sync.glue.catalogId", None,
    "Glue: the catalog (AWS account id) to sync to; the caller's account when unset.", parse_str)
GLUE_ENDPOINT = option(
    "hoodie.aws.glue.endpoint", None, "Glue endpoint URL (AWS's default when unset).", parse_str)
GLUE_REGION = option(
    "hoodie.aws.glue.region", None, "Glue region (the AWS environment's when unset).", parse_str)
AWS_ACCESS_KEY = option("hoodie.aws.access.key", None, "AWS access key for Glue.", parse_str)
AWS_SECRET_KEY = option("hoodie.aws.secret.key", None, "AWS secret key for Glue.", parse_str)
AWS_SESSION_TOKEN = option("hoodie.aws.session.token", None, "AWS session token for Glue.", parse_str)

for _key, _does in (
        ("hoodie.datasource.hive_sync.bucket_sync", "registers the bucket index's bucket spec in Hive"),
        ("hoodie.datasource.hive_sync.sync_comment", "copies schema field docs into column comments"),
        ("hoodie.datasource.hive_sync.use_pre_apache_input_format", "registers com.uber.hoodie input formats"),
        ("hoodie.datasource.meta.sync.glue.partition_index_fields.enable", "manages Glue partition indexes")):
    option(_key, False, f"Not implemented: only false is accepted (with true Hudi {_does}).",
           only_false(hudi_does=_does))

for _key, _what in (
        ("hoodie.datasource.hive_sync.bucket_sync_spec", "the bucket spec of bucket_sync"),
        ("hoodie.datasource.meta.sync.glue.partition_index_fields", "Glue partition index columns"),
        ("hoodie.meta_sync.global.replicate.timestamp", "GlobalHiveSyncTool's replication timestamp"),
        ("hoodie.aws.role.arn", "an IAM role Hudi assumes for Glue"),
        ("hoodie.aws.role.external.id", "the external id of that role"),
        ("hoodie.aws.role.session.name", "the session name of that role")):
    option(_key, None, f"Not implemented: {_what}; remove it (pyhudi uses the AWS environment's credentials "
           "or hoodie.aws.access.key/secret.key).",
           _refused(_what))

_NO_EFFECT = "Accepted without effect: "
for _key, _why in (
        ("hoodie.datasource.hive_sync.username", "the HiveServer2 user of mode jdbc"),
        ("hoodie.datasource.hive_sync.password", "the HiveServer2 password of mode jdbc"),
        ("hoodie.datasource.hive_sync.filter_pushdown_enabled", "pyhudi always reads only the touched partitions "
         "from the catalog on an incremental sync"),
        ("hoodie.datasource.hive_sync.filter_pushdown_max_size", "pyhudi fetches touched partitions by name in "
         "batches, whatever their number"),
        ("hoodie.datasource.meta.sync.base.path", "the writer syncs the table it wrote"),
        ("hoodie.meta.sync.metadata_file_listing", "a full sync lists live partitions from the file-system view"),
        ("hoodie.datasource.meta.sync.glue.all_partitions_read_parallelism", "Hudi's thread count for Glue reads"),
        ("hoodie.datasource.meta.sync.glue.changed_partitions_read_parallelism", "Hudi's thread count for Glue "
         "reads"),
        ("hoodie.datasource.meta.sync.glue.partition_change_parallelism", "Hudi's thread count for Glue writes"),
        ("hoodie.meta.sync.datahub.dataplatform.name", "DataHub sync, which pyhudi refuses"),
        ("hoodie.meta.sync.datahub.dataset.env", "DataHub sync, which pyhudi refuses"),
        ("hoodie.meta.sync.datahub.dataset.identifier.class", "DataHub sync, which pyhudi refuses"),
        ("hoodie.meta.sync.datahub.emitter.server", "DataHub sync, which pyhudi refuses"),
        ("hoodie.meta.sync.datahub.emitter.supplier.class", "DataHub sync, which pyhudi refuses"),
        ("hoodie.meta.sync.datahub.emitter.token", "DataHub sync, which pyhudi refuses")):
    option(_key, None, _NO_EFFECT + _why + ".", parse_str)
