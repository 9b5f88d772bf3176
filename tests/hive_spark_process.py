"""A Spark session with Hive support against the suite's metastore: what a Spark user querying the
catalog sees of a synced table.

    python tests/hive_spark_process.py METASTORE_URI WAREHOUSE_DIR QUERIES_JSON

Each query is a SQL string or ``table:<db.name>``; the answer, printed as one JSON line, is per
query its rows (sorted, as dicts) or its error ``{"error": "..."}``. Run in its own process because
a session's catalog is fixed when it starts, and the suite's session has no Hive support.
"""

from __future__ import annotations

import json
import sys


def main(uri: str, warehouse: str, queries: list[str]) -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("hive-catalog")
             .config("spark.sql.catalogImplementation", "hive").config("hive.metastore.uris", uri)
             .config("spark.sql.warehouse.dir", warehouse).config("spark.sql.shuffle.partitions", "1")
             .config("spark.ui.enabled", "false").enableHiveSupport().getOrCreate())
    if hasattr(spark, "dataSource"):  # PySpark 4: pyhudi's hudi source (3.5 has no Python sources)
        from pyhudi.spark.datasource import register

        register(spark)
    answers = []
    for query in queries:
        try:
            df = spark.table(query[len("table:"):]) if query.startswith("table:") else spark.sql(query)
            rows = [r.asDict(recursive=True) for r in df.collect()]
            answers.append(sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str)))
        except Exception as exc:  # reported to the test, which decides
            answers.append({"error": f"{type(exc).__name__}: {exc}"[:2000]})
    print("ANSWERS " + json.dumps(answers, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
