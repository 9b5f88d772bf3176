"""A streaming writer process for the streaming tests: its own local Spark, JSON files in, a Hudi table out.

    python tests/stream_process.py INPUT TABLE CHECKPOINT OPTIONS_JSON REPORT.json [exit-after-write]

Streams the JSON files of INPUT, one file per micro-batch, into TABLE through ``pyhudi.write_stream``
until every file is processed, waits for the background compactions, and writes the sink's batch
reports to REPORT.json. With ``exit-after-write`` the process exits abruptly right after the first
micro-batch it commits: the table holds the batch, Spark's checkpoint does not mark it done.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

SCHEMA = "id string, p string, ts long, val string, _hoodie_is_deleted boolean"


def main(source: str, table: str, checkpoint: str, options_json: str, report: str, *mode: str) -> None:
    import pyhudi
    from pyhudi.spark.streaming import HudiStreamSink

    spark = pyhudi.spark_session("local[1]", spark__sql__shuffle__partitions="2", spark__driver__memory="1g")
    sink = HudiStreamSink(table, json.loads(options_json))

    def batch(df, batch_id: int) -> None:
        sink(df, batch_id)
        done = sink.reports[-1]
        if "exit-after-write" in mode and not done.skipped:
            os._exit(3)  # after the commit, before Spark records the batch as done

    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
    query = stream.writeStream.foreachBatch(batch).option("checkpointLocation", checkpoint).start()
    query.processAllAvailable()
    query.stop()
    sink.wait_for_services()
    with open(report, "w") as f:
        json.dump([dataclasses.asdict(r) for r in sink.reports], f)


if __name__ == "__main__":
    main(*sys.argv[1:])
