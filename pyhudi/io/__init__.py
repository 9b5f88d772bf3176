"""The file formats of a Hudi table, read and written without Spark or a JVM: parquet base files
with Hudi's footer (:mod:`~pyhudi.io.base_file`), merge-on-read log blocks
(:mod:`~pyhudi.io.log_format`), HFiles of the metadata table (:mod:`~pyhudi.io.hfile`), Avro
schemas and datums (:mod:`~pyhudi.io.avro_schema`, :mod:`~pyhudi.io.avro_codec`), bloom filters,
data file names, Java's hashes (:mod:`~pyhudi.io.java_hash`), key-array helpers and the reading of
rows written under an older schema (:mod:`~pyhudi.io.reconcile`). It knows bytes and Arrow
tables, not timelines: it may import only ``config``, ``storage``, ``errors`` and
``instant_time``, never the timeline, the table or anything above, and never pyspark.
"""
