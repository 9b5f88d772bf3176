"""Everything that touches PySpark, and the only package that imports it (with the CLI's Spark
commands and the demo above it): the session, the write entry point and pipeline, the snapshot,
incremental and time-travel reader and data source, the distributed index lookups, the jobs that
run compaction, clustering and record-index builds, streaming, and the worker glue every
``mapInArrow`` goes through (:mod:`~pyhudi.spark.worker`, which also hands the Spark task's
identity to the write layer). The format and planning work it distributes lives in the lower
packages as plain pyarrow code; only ``report``, ``cli``, ``demo`` and the lazy entry points of
the root package may import it.
"""
