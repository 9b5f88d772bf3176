"""Statements on tables whose payload is not one of the two merge modes'.

Hudi's ``MERGE INTO`` writes through its ``ExpressionPayload`` (``MergeIntoHoodieTableCommand``):
a matched delete removes the record whatever its ordering values
(``ExpressionPayload.processMatchedRecord``), a matched update is the row the clause assigns. pyhudi
writes a merge as an upsert merged by the table's payload, so:

* a matched delete carries no ordering values, which makes it a hard delete under every payload
  (``MySqlDebeziumAvroPayload`` keeps the stored record on an equal ``_event_seq``, and
  ``PartialUpdateAvroPayload`` folds a delete with an ordering value into an update);
* a matched update on a payload that merges fields or keeps ties (``OverwriteNonDefaults``,
  ``PartialUpdate``, the Debezium payloads) is refused, naming the payload: the upsert would not
  write the assigned row.

And Hudi records the payload class a writer names in ``hoodie.properties`` of a copy-on-write table
too (``HoodieTableMetaClient.PropertyBuilder.setPayloadClassName``), so later writes merge by it
without the option repeated; a CDC table without meta fields is refused (change data names records
by the stored record key).
"""

from __future__ import annotations

import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.errors import HudiUnsupportedError

PKG = "org.apache.hudi.common.model."


def _options(payload: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "p", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": "COPY_ON_WRITE", "hoodie.datasource.write.payload.class": payload,
            **extra}


def _ids(spark, path: str) -> list[int]:
    """The ids of the table's records, as pyhudi reads them and as hudi-rs does (the same)."""
    ids = sorted(r["id"] for r in pyhudi.read(spark, path).collect())
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == ids
    return ids


def test_a_merge_delete_on_a_mysql_debezium_table_deletes(spark, tmp_path):
    path = str(tmp_path / "mysql")
    schema = "id int, day string, ts long, v string, _event_seq string, _change_operation_type string"
    rows = [(1, "d0", 1, "a", "1.10", "u"), (2, "d0", 1, "b", "1.11", "u"), (3, "d1", 1, "c", "1.12", "u")]
    pyhudi.write(spark.createDataFrame(rows, schema), path, _options(PKG + "debezium.MySqlDebeziumAvroPayload"))
    source = spark.createDataFrame([(1, "d0"), (3, "d1")], "id int, day string")
    res = (pyhudi.merge(spark, path, source, on="t.id = s.id AND t.day = s.day")
           .when_matched_delete().execute())
    assert res.stats["deleted"] == 2
    assert _ids(spark, path) == [2]  # (the stored _event_seq ties the delete's: kept, were it carried)
    with pytest.raises(HudiUnsupportedError, match=r"MySqlDebeziumAvroPayload.*_event_seq.*ExpressionPayload"):
        (pyhudi.merge(spark, path, source, on="t.id = s.id AND t.day = s.day")
         .when_matched_update(set={"v": "'z'"}).execute())
    assert _ids(spark, path) == [2]


def test_a_merge_delete_on_a_partial_update_table_with_a_global_index_deletes(spark, tmp_path):
    """The global index folds duplicates in Spark (``PartialUpdateAvroPayload.preCombine``), where a
    delete flagged by the statement must survive the fold of a table with ``_hoodie_is_deleted``."""
    path = str(tmp_path / "partial")
    schema = "id int, day string, ts long, v string, _hoodie_is_deleted boolean"
    opts = _options(PKG + "PartialUpdateAvroPayload", **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    pyhudi.write(spark.createDataFrame([(1, "d0", 1, "a", False), (2, "d0", 1, "b", False)], schema), path, opts)
    source = spark.createDataFrame([(1, "d0")], "id int, day string")
    res = pyhudi.merge(spark, path, source, on="t.id = s.id").when_matched_delete().execute(
        {"hoodie.index.type": "GLOBAL_SIMPLE"})
    assert res.stats["deleted"] == 1
    assert _ids(spark, path) == [2]
    with pytest.raises(HudiUnsupportedError, match="PartialUpdateAvroPayload"):
        pyhudi.merge(spark, path, source, on="t.id = s.id").when_matched_update(set={"v": "NULL"}).execute()


def test_a_copy_on_write_table_records_the_payload_its_writer_names(spark, tmp_path):
    path = str(tmp_path / "dms")
    schema = "id int, day string, ts long, v string, Op string"
    pyhudi.write(spark.createDataFrame([(1, "d0", 1, "a", "I"), (2, "d0", 1, "b", "I")], schema), path,
                 _options(PKG + "AWSDmsAvroPayload"))
    assert pyhudi.HudiTable(path).properties["hoodie.compaction.payload.class"] == PKG + "AWSDmsAvroPayload"
    later = {k: v for k, v in _options("x").items() if k != "hoodie.datasource.write.payload.class"}
    pyhudi.write(spark.createDataFrame([(1, "d0", 2, "a", "D")], schema), path, later)  # Op = 'D': a delete
    assert _ids(spark, path) == [2]
    plain = str(tmp_path / "plain")  # the default payload stays unrecorded, as Hudi leaves it
    pyhudi.write(spark.createDataFrame([(1, "d0", 1, "a", "I")], schema), plain,
                 {k: v for k, v in later.items()})
    assert "hoodie.compaction.payload.class" not in pyhudi.HudiTable(plain).properties


def test_cdc_without_meta_fields_is_refused_before_anything_is_written(spark, tmp_path):
    path = tmp_path / "nometa"
    opts = {**_options(PKG + "OverwriteWithLatestAvroPayload"), "hoodie.table.cdc.enabled": "true",
            "hoodie.populate.meta.fields": "false", "hoodie.datasource.write.operation": "insert"}
    with pytest.raises(HudiUnsupportedError, match="hoodie.table.cdc.enabled=true needs hoodie.populate.meta.fields"):
        pyhudi.write(spark.createDataFrame([(1, "d0", 1)], "id int, day string, ts long"), str(path), opts)
    assert not (path / ".hoodie" / "hoodie.properties").exists()
