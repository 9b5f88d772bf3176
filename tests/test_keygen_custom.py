"""CustomKeyGenerator: keys and partition paths as Apache Hudi builds them, and the tables it keys.

The expectations are computed by hand from Hudi's classes (master of mid-2024):

* ``CustomAvroKeyGenerator``/``CustomKeyGenerator``: ``hoodie.datasource.write.partitionpath.field``
  is ``field:TYPE`` entries (``split(":")`` must give two parts, else "Unable to find field names
  for partition path in proper format"; the type is ``PartitionKeyType.valueOf(upper)``, SIMPLE or
  TIMESTAMP); each part is made by a ``SimpleKeyGenerator``/``TimestampBasedKeyGenerator`` of that
  one field and the parts are joined with ``/``; the record key is a ``SimpleKeyGenerator``'s
  (bare value) for one field, a ``ComplexKeyGenerator``'s (``f1:v1,f2:v2``) for several.
* ``KeyGenUtils.getPartitionPath`` (a SIMPLE part): null or empty -> ``__HIVE_DEFAULT_PARTITION__``,
  then ``PartitionPathEncodeUtils.escapePathName`` when urlencode is on, then ``field=`` when
  hive-style.
* ``TimestampBasedAvroKeyGenerator.getPartitionPath`` (a TIMESTAMP part): the value read as a time
  and formatted, escaped when urlencode is on, ``field=`` when hive-style.
* ``hoodie.table.partition.fields``: bare names in table version 6 (Hudi 0.14/0.15,
  ``SparkKeyGenUtils.getPartitionColumns``), ``field:TYPE`` from version 8 on
  (``HoodieSparkSqlWriter``'s ``partitionColumnsForKeyGenerator``; readers strip the types,
  ``HoodieTableConfigUtils.getPartitionFieldProp``); ``validateTableConfig`` compares the names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, spark_jobs_of, unzip_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyhudi
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import HudiConfigError, HudiTableMismatchError
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.keygen.spec import CUSTOM, SIMPLE, TIMESTAMP, partition_values_in_paths, resolve_keygen
from pyhudi.services.table_version import property_changes

HUDI1X = Path(__file__).parent / "data" / "hudi1x"
PARTITION_OPTION = "hoodie.datasource.write.partitionpath.field"
SCHEMA = "id string, name string, region string, ts long, v int"
ROWS = [("k1", "n1", "us/east", 1700000000, 1),   # 2023-11-14T22:13:20Z
        ("k2", "n2", None, 1700086400, 2),        # 2023-11-15T22:13:20Z
        ("k3", "n3", "", 0, 3)]
BASE = {"hoodie.table.name": "custom", "hoodie.datasource.write.precombine.field": "v",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator",
        "hoodie.datasource.write.partitionpath.field": "region:SIMPLE,ts:TIMESTAMP",
        "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP"}


def _props(path: Path) -> dict[str, str]:
    return dict(pyhudi.HudiTable(str(path)).properties)


def _keys(path: Path) -> list[tuple[str, str, int]]:
    return sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"], r["v"]) for r in hudi_rs_rows(path))


# -- the spec, without Spark -----------------------------------------------------------------------

def test_the_partition_entries_give_fields_and_types():
    spec = resolve_keygen(HudiConfig.of({**BASE, "hoodie.datasource.write.recordkey.field": "id",
                                         "hoodie.keygen.timebased.output.dateformat": "yyyy",
                                         "hoodie.datasource.write.partitionpath.field": "region:simple, ts:Timestamp"}))
    assert (spec.kind, spec.partition_fields, spec.partition_types) == (CUSTOM, ("region", "ts"), (SIMPLE, TIMESTAMP))
    assert spec.class_name == "org.apache.hudi.keygen.CustomKeyGenerator"
    # typed entries without a key generator named infer the custom one (Hudi 1.1's inferKeyGeneratorType)
    inferred = resolve_keygen(HudiConfig.of({"hoodie.datasource.write.recordkey.field": "id",
                                             "hoodie.datasource.write.partitionpath.field": "region:SIMPLE"}))
    assert (inferred.kind, inferred.partition_fields, inferred.has_timestamp_part) == (CUSTOM, ("region",), False)
    # the Avro twin and the type name key records alike
    for option in ({"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomAvroKeyGenerator"},
                   {"hoodie.datasource.write.keygenerator.class": "", "hoodie.datasource.write.keygenerator.type":
                    "CUSTOM_AVRO"}):
        assert resolve_keygen(HudiConfig.of({**BASE, **option, "hoodie.datasource.write.recordkey.field": "id",
                                             "hoodie.keygen.timebased.output.dateformat": "yyyy"})).kind == CUSTOM


@pytest.mark.parametrize("partition_field, message", [
    ("region,ts:TIMESTAMP", "'region' is not field:TYPE"),            # CustomAvroKeyGenerator: no type
    ("region:SIMPLE:x", "'region:SIMPLE:x' is not field:TYPE"),       # three parts
    ("region:HASH", "partition type 'HASH'.*SIMPLE and TIMESTAMP"),   # PartitionKeyType.valueOf
    ("region:SIMPLE,ts:TIMESTAMP", "TIMESTAMP partition field ts needs hoodie.keygen.timebased.output.dateformat"),
])
def test_malformed_custom_partition_entries_are_refused_naming_them(partition_field, message):
    cfg = HudiConfig.of({**BASE, "hoodie.datasource.write.recordkey.field": "id",
                         "hoodie.datasource.write.partitionpath.field": partition_field})
    with pytest.raises(HudiConfigError, match=message):
        resolve_keygen(cfg)


def test_typed_entries_for_another_key_generator_are_refused():
    cfg = HudiConfig.of({"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.keygenerator.type":
                         "COMPLEX", "hoodie.datasource.write.partitionpath.field": "region:SIMPLE"})
    with pytest.raises(HudiConfigError, match="only CustomKeyGenerator takes"):
        resolve_keygen(cfg)


def test_partition_pruning_by_name_only_where_every_recorded_part_is_simple():
    def prunes(fields: str, **extra: str) -> bool:
        return partition_values_in_paths({P.KEYGEN_TYPE: "CUSTOM", P.PARTITION_FIELDS: fields, **extra})

    assert prunes("region:SIMPLE,day:simple")                          # version 8 on: types recorded
    assert not prunes("region:SIMPLE,ts:TIMESTAMP")                    # a timestamp part is no value
    assert not prunes("region,ts")                                     # version 6: the types are unknown
    assert not partition_values_in_paths({P.KEYGEN_CLASS: "org.apache.hudi.keygen.CustomKeyGenerator",
                                          P.PARTITION_FIELDS: "region"})


# -- writes ------------------------------------------------------------------------------------------

EXPECTED = {
    # one key field: SimpleKeyGenerator's bare key; hive-style and urlencode apply to each part
    "hive_encoded": ({"hoodie.datasource.write.recordkey.field": "id",
                      "hoodie.datasource.write.hive_style_partitioning": "true",
                      "hoodie.datasource.write.partitionpath.urlencode": "true",
                      "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"},
                     [("k1", "region=us%2Feast/ts=2023%2F11%2F14", 1),
                      ("k2", "region=__HIVE_DEFAULT_PARTITION__/ts=2023%2F11%2F15", 2),
                      ("k3", "region=__HIVE_DEFAULT_PARTITION__/ts=1970%2F01%2F01", 3)]),
    # two key fields: ComplexKeyGenerator's key; plain values, the SIMPLE part's '/' nests folders
    "plain_complex": ({"hoodie.datasource.write.recordkey.field": "id,name",
                       "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd"},
                      [("id:k1,name:n1", "us/east/20231114", 1),
                       ("id:k2,name:n2", "__HIVE_DEFAULT_PARTITION__/20231115", 2),
                       ("id:k3,name:n3", "__HIVE_DEFAULT_PARTITION__/19700101", 3)]),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_a_custom_write_keys_and_places_records_as_hudi_and_upserts_by_those_keys(spark, tmp_path, case):
    options, expected = EXPECTED[case]
    path = tmp_path / "t"
    df = spark.createDataFrame(ROWS, SCHEMA)
    pyhudi.write(df, str(path), {**BASE, **options, "hoodie.datasource.write.operation": "insert"})
    assert _keys(path) == expected
    for _, partition, _ in expected:
        assert (path / partition).is_dir()
    props = _props(path)
    assert props[P.KEYGEN_CLASS] == "org.apache.hudi.keygen.CustomKeyGenerator"
    assert props[P.PARTITION_FIELDS] == "region,ts"  # version 6: bare names, as Hudi 0.14/0.15 record them
    # an upsert of the same rows finds every stored record: same keys, new values, nothing added
    pyhudi.write(df.selectExpr("id", "name", "region", "ts", "v + 10 as v"), str(path), {**BASE, **options})
    assert _keys(path) == [(k, p, v + 10) for k, p, v in expected]


def test_a_version_6_custom_table_takes_the_types_from_each_write(spark, tmp_path):
    """Version 6 records bare names: Hudi needs ``field:TYPE`` on every write, and so does pyhudi;
    a write that names the fields with their types agrees with the table (names compared)."""
    path = tmp_path / "t"
    options = {**BASE, "hoodie.datasource.write.recordkey.field": "id",
               "hoodie.keygen.timebased.output.dateformat": "yyyy"}
    df = spark.createDataFrame(ROWS[:1], SCHEMA)
    pyhudi.write(df, str(path), options)
    bare = {k: v for k, v in options.items() if k != "hoodie.datasource.write.partitionpath.field"}
    with pytest.raises(HudiConfigError, match="'region' is not field:TYPE.*give this option with the types"):
        pyhudi.write(df, str(path), bare)
    with pytest.raises(HudiTableMismatchError, match="partitionpath.field"):
        pyhudi.write(df, str(path), {**options, PARTITION_OPTION: "name:SIMPLE,ts:TIMESTAMP"})
    assert len(pyhudi.HudiTable(str(path)).timeline.completed_writes()) == 1


def test_a_version_8_custom_table_records_the_types_and_writes_without_them(spark, tmp_path):
    path = tmp_path / "t"
    options = {**BASE, "hoodie.datasource.write.recordkey.field": "id", "hoodie.write.table.version": "8",
               "hoodie.keygen.timebased.output.dateformat": "yyyy"}
    df = spark.createDataFrame(ROWS, SCHEMA)
    pyhudi.write(df, str(path), options)
    props = _props(path)
    assert props[P.PARTITION_FIELDS] == "region:SIMPLE,ts:TIMESTAMP"
    assert props[P.KEYGEN_TYPE] == "CUSTOM"
    table = pyhudi.HudiTable(str(path))
    assert table.config.partition_fields == ("region", "ts")
    assert not partition_values_in_paths(table.properties)
    # the table's own fields (with types) key the next write; a type that differs is refused
    pyhudi.write(df.selectExpr("id", "name", "region", "ts", "v + 10 as v"), str(path),
                 {"hoodie.datasource.write.precombine.field": "v"})
    assert sorted((r["id"], r["v"], r["_hoodie_partition_path"]) for r in pyhudi.read(spark, str(path)).collect()) == \
        [("k1", 11, "us/east/2023"), ("k2", 12, "__HIVE_DEFAULT_PARTITION__/2023"),
         ("k3", 13, "__HIVE_DEFAULT_PARTITION__/1970")]
    with pytest.raises(HudiTableMismatchError, match="partitionpath.field"):
        pyhudi.write(df, str(path), {**options, PARTITION_OPTION: "region:SIMPLE,ts:SIMPLE"})


_HUDI_PROPS = ("hoodie.table.keygenerator.type=COMPLEX", "hoodie.table.partition.fields=byteField,shortField")
_CUSTOM_PROPS = ("hoodie.table.keygenerator.type=CUSTOM",
                 "hoodie.table.partition.fields=byteField:SIMPLE,shortField:SIMPLE")


def _rewrite_props(path: Path, old: tuple[str, ...], new: tuple[str, ...]) -> None:
    props = path / ".hoodie" / "hoodie.properties"
    text = props.read_text()
    for a, b in zip(old, new):
        assert a.replace(":", "\\:") in text or a in text
        text = text.replace(a.replace(":", "\\:"), b).replace(a, b)
    props.write_text(text)


def _hudi_rs_rows_as_complex(path: Path, tmp: Path) -> list[dict]:
    """hudi-rs (0.x) takes ``field:TYPE`` in hoodie.table.partition.fields for a column name, so it
    reads a copy whose properties say the equivalent ComplexKeyGenerator (same keys, same folders)."""
    copy = tmp / "as_complex"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy)
    _rewrite_props(copy, _CUSTOM_PROPS, _HUDI_PROPS)
    return hudi_rs_rows(copy)


@pytest.fixture
def hudi_custom_table(tmp_path) -> Path:
    """A table Apache Hudi 1.x wrote (``cow__v8_complexkeygen_hivestyle``: keys ``id,name``,
    hive-style partitions ``byteField/shortField``), its hoodie.properties saying what Hudi records
    for the same table keyed by CustomKeyGenerator with ``byteField:SIMPLE,shortField:SIMPLE``: the
    type CUSTOM and the typed fields. Two key fields and SIMPLE parts key and place records exactly
    as ComplexKeyGenerator did, so the data files are what Hudi's custom key generator writes."""
    zipped = HUDI1X / "cow__v8_complexkeygen_hivestyle.zip"
    if not zipped.exists():
        pytest.skip(f"{zipped} is absent")
    path = unzip_table(zipped, tmp_path / "hudi")
    _rewrite_props(path, _HUDI_PROPS, _CUSTOM_PROPS)
    return path


def test_a_table_hudi_keyed_with_custom_reads_prunes_and_takes_upserts(spark, hudi_custom_table, tmp_path):
    path = str(hudi_custom_table)
    table = pyhudi.HudiTable(path)
    assert table.config.partition_fields == ("byteField", "shortField")
    assert partition_values_in_paths(table.properties)  # SIMPLE parts only: folders carry the values
    stored = {(r["id"], r["name"]): r for r in _hudi_rs_rows_as_complex(hudi_custom_table, tmp_path)}
    rows = pyhudi.read(spark, path).collect()
    assert sorted((r["id"], r["name"], r["_hoodie_record_key"]) for r in rows) == \
        sorted((k[0], k[1], r["_hoodie_record_key"]) for k, r in stored.items())
    some = rows[0]
    pruned = pyhudi.read(spark, path, filters=f"byteField = {some['byteField']}").collect()
    assert sorted(r["id"] for r in pruned) == sorted(r["id"] for r in rows if r["byteField"] == some["byteField"])
    # an upsert of one stored record by pyhudi finds it: the key it computes is the one Hudi stored
    update = pyhudi.read(spark, path).where(f"id = {some['id']}").drop(*META_FIELDS)
    update = update.withColumn("longField", update["longField"] + 1)
    pyhudi.write(update, path, {PARTITION_OPTION: "byteField:SIMPLE,shortField:SIMPLE"})
    after = _hudi_rs_rows_as_complex(hudi_custom_table, tmp_path)
    assert len(after) == len(stored)
    changed = [r for r in after if r["id"] == some["id"]]
    assert [r["longField"] for r in changed] == [some["longField"] + 1]
    assert changed[0]["_hoodie_record_key"] == some["_hoodie_record_key"] == f"id:{some['id']},name:{some['name']}"
    assert changed[0]["_hoodie_partition_path"] == some["_hoodie_partition_path"]
    assert sorted(r["id"] for r in pyhudi.read(spark, path).collect()) == sorted(r[0] for r in stored)


# -- a model of Hudi's rules against the Spark expressions ---------------------------------------------

#: ``PartitionPathEncodeUtils.charToEscape``: 0x00-0x1F and these, each written ``%XX`` (upper hex)
_HUDI_ESCAPED = {chr(c) for c in range(0x20)} | set("\"#%'*/:=?\\\x7f{[]^")
_DEFAULT = "__HIVE_DEFAULT_PARTITION__"


def _model_key(fields: list[str], row: dict) -> str:
    """CustomKeyGenerator's record key: SimpleKeyGenerator's for one field, ComplexKeyGenerator's
    (``KeyGenUtils.getRecordKey``: ``f:v`` joined by ``,``) for several."""
    if len(fields) == 1:
        return str(row[fields[0]])
    return ",".join(f"{f}:{row[f]}" for f in fields)


def _model_path(row: dict, *, hive: bool, encode: bool) -> str:
    """``region:SIMPLE,ts:TIMESTAMP`` (UNIX_TIMESTAMP, ``yyyyMMdd``, UTC) as Hudi renders it."""
    import datetime

    def escape(text: str) -> str:
        return "".join(f"%{ord(ch):02X}" if ch in _HUDI_ESCAPED else ch for ch in text)

    region = row["region"] if row["region"] else _DEFAULT   # KeyGenUtils.getPartitionPath
    region = escape(region) if encode else region
    seconds = 1 if row["ts"] is None else row["ts"]          # a null timestamp is 1 unit after the epoch
    day = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y%m%d")
    day = escape(day) if encode else day
    return f"region={region}/ts={day}" if hive else f"{region}/{day}"


_ROW = st.fixed_dictionaries({
    "id": st.text(alphabet="abc19", min_size=1, max_size=4),
    "name": st.text(alphabet="xyz", min_size=1, max_size=3),
    "region": st.none() | st.text(alphabet="ab /%=:#{é\t", max_size=5),
    "ts": st.none() | st.integers(min_value=0, max_value=4_000_000_000),
})


_COMBINATIONS = [(keys, hive, encode) for keys in (("id",), ("id", "name")) for hive in (False, True)
                 for encode in (False, True)]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_ROW, min_size=1, max_size=40))
def test_custom_keys_and_paths_equal_a_model_of_hudis_rules(spark, rows):
    """Every record key and partition path of random rows, for one and two key fields, hive-style
    and urlencode on and off (one Spark job per example), equals the model's."""
    from pyhudi.spark.keygen import partition_path_expr, record_key_expr

    df = spark.createDataFrame([(r["id"], r["name"], r["region"], r["ts"], 0) for r in rows], SCHEMA)
    columns = []
    for i, (keys, hive, encode) in enumerate(_COMBINATIONS):
        spec = resolve_keygen(HudiConfig.of({
            **BASE, "hoodie.datasource.write.recordkey.field": ",".join(keys),
            "hoodie.datasource.write.hive_style_partitioning": str(hive), "hoodie.keygen.timebased.output.timezone":
            "UTC", "hoodie.datasource.write.partitionpath.urlencode": str(encode),
            "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd"}))
        columns += [record_key_expr(spec, df.schema).alias(f"k{i}"), partition_path_expr(spec, df.schema, "UTC")
                    .alias(f"p{i}")]
    got = [tuple(r) for r in df.select(*columns).collect()]
    expected = [tuple(v for keys, hive, encode in _COMBINATIONS
                      for v in (_model_key(list(keys), r), _model_path(r, hive=hive, encode=encode))) for r in rows]
    assert got == expected


def test_a_version_change_records_the_types_and_strips_them(spark, tmp_path):
    """``SevenToEightUpgradeHandler.upgradePartitionFields`` records the writer's ``field:TYPE``
    entries; ``EightToSevenDowngradeHandler.downgradePartitionFields`` leaves the bare names."""
    path = tmp_path / "t"
    options = {**BASE, "hoodie.datasource.write.recordkey.field": "id",
               "hoodie.keygen.timebased.output.dateformat": "yyyy"}
    df = spark.createDataFrame(ROWS[:1], SCHEMA)
    pyhudi.write(df, str(path), options)
    assert _props(path)[P.PARTITION_FIELDS] == "region,ts"
    pyhudi.write(df, str(path), {**options, "hoodie.write.table.version": "8", "hoodie.write.auto.upgrade": "true"})
    assert (_props(path)[P.VERSION], _props(path)[P.PARTITION_FIELDS]) == ("8", "region:SIMPLE,ts:TIMESTAMP")
    assert [r["_hoodie_partition_path"] for r in pyhudi.read(spark, str(path)).collect()] == ["us/east/2023"]
    down = property_changes(_props(path), 8, 6)
    assert (down[P.VERSION], down[P.PARTITION_FIELDS]) == ("6", "region,ts")


# -- the partition path check runs no job over the input where the parts' shapes are known ---------------
@pytest.mark.parametrize(("partition_field", "extra", "scans"), [
    ("v:SIMPLE,ts:TIMESTAMP", {}, False),         # an int part is one plain folder name per value
    ("ts:TIMESTAMP", {}, False),                # TIMESTAMP parts alone: the output format decides the shape
    ("region:SIMPLE,ts:TIMESTAMP", {"hoodie.datasource.write.hive_style_partitioning": "true",
                                    "hoodie.datasource.write.partitionpath.urlencode": "true"}, False),
    ("region:SIMPLE,ts:TIMESTAMP", {}, True),  # a free-form string part: its distinct values are checked
])
def test_custom_partition_check_runs_a_job_only_for_free_form_string_parts(spark, partition_field, extra, scans):
    """``CustomKeyGenerator.getPartitionPath`` joins its parts with ``/``, so the paths are safe
    where each part is: a TIMESTAMP part (``TimestampBasedAvroKeyGenerator``) is checked by one
    rendered value, computed without a Spark job; only a string SIMPLE part left as it is
    (``KeyGenUtils.getPartitionPath`` without urlencode and hive-style) needs the batch's distinct
    paths (a distinct: one or two jobs with AQE). Before, every custom key generator with a
    TIMESTAMP part ran that distinct."""
    from pyhudi.spark.keygen import check_partitions

    spec = resolve_keygen(HudiConfig.of({**BASE, "hoodie.datasource.write.recordkey.field": "id",
                                         "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
                                         PARTITION_OPTION: partition_field, **extra}))
    df = spark.createDataFrame(ROWS, SCHEMA)
    jobs = spark_jobs_of(spark, f"pyhudi-check-{scans}-{partition_field}", lambda: check_partitions(df, spec, None))
    assert (jobs > 0) == scans, jobs


def test_custom_timestamp_parts_that_cannot_be_folders_are_refused_without_a_job(spark, tmp_path):
    """An output format that renders a hidden folder name (``'.'yyyy``) is refused before the
    write starts, as for ``TimestampBasedKeyGenerator``; the same format with hive-style
    partitioning (``ts=.1970``) is a plain folder name and is written."""
    from pyhudi.errors import HudiPartitionPathError

    df = spark.createDataFrame(ROWS, SCHEMA)
    options = {**BASE, "hoodie.datasource.write.recordkey.field": "id", PARTITION_OPTION: "v:SIMPLE,ts:TIMESTAMP",
               "hoodie.keygen.timebased.output.dateformat": "'.'yyyy", "hoodie.datasource.write.operation": "insert"}
    path = tmp_path / "t"
    with pytest.raises(HudiPartitionPathError, match="starting with '.'"):
        pyhudi.write(df, str(path), options)
    assert not path.exists()  # refused before the table or an instant was made
    pyhudi.write(df, str(path), {**options, "hoodie.datasource.write.hive_style_partitioning": "true"})
    assert sorted(p for _, p, _ in _keys(path)) == ["v=1/ts=.2023", "v=2/ts=.2023", "v=3/ts=.1970"]


def test_a_custom_date_string_part_with_a_bad_value_fails_in_the_write_and_leaves_the_table(spark, tmp_path):
    """With no distinct job before the write, a DATE_STRING value that matches none of the input
    formats (``TimestampBasedAvroKeyGenerator`` throws on it) fails inside the write's own job, by
    name (HudiKeyError), as for ``TimestampBasedKeyGenerator``; the table keeps its records and no
    instant is left pending."""
    from pyhudi.errors import HudiKeyError

    path = str(tmp_path / "t")
    ddl = "id string, v int, d string"
    options = {**BASE, "hoodie.datasource.write.recordkey.field": "id", PARTITION_OPTION: "v:SIMPLE,d:TIMESTAMP",
               "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
               "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd",
               "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd"}
    pyhudi.write(spark.createDataFrame([("a", 1, "2024-01-02")], ddl), path, options)
    with pytest.raises(HudiKeyError, match="partition field 'd' has values that match none of the input date"):
        pyhudi.write(spark.createDataFrame([("b", 1, "garbage")], ddl), path, options)
    assert not pyhudi.HudiTable(path).timeline.pending()
    assert [(r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in hudi_rs_rows(path)] == [("a", "1/20240102")]
