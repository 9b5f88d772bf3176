"""A batch Spark holds on the driver, brought to Python without a Spark job.

A pandas frame made with Arrow on (below ``spark.sql.execution.arrow.localRelationThreshold``) and
SQL ``VALUES`` are local relations: their rows live in the driver's JVM. Spark's optimizer folds a
projection of one into a new local relation (``ConvertToLocalRelation``, evaluating the
expressions row by row on the driver), and ``collect`` of that runs no Spark job, where a count,
a shuffle or ``toArrow`` each start one (0.02-0.3 s on a warm local session, most of a small
commit). The write of a small local batch keyed by Spark's expressions
(:mod:`pyhudi.spark.small_write`) and the partition-path check
(:func:`pyhudi.spark.keygen.check_partitions`) take their rows this way; a write keyed with
pyarrow reads an exact local relation as :func:`held_arrow` below.

Rows come back as tuples of Spark's internal values (:func:`~pyhudi.spark.compat.collect_values`:
no ``Row`` objects) and are put into columns with pyarrow, which is exact for plain values
(strings, integers, floating point, booleans, binary, decimals; dates as days and timestamps as
microseconds since the epoch, with or without time zone, so that no Python ``date`` or
``datetime`` is made). A batch with a nested column is collected with ``toArrow``: one Spark job.

A larger pandas or Arrow frame (past ``spark.sql.execution.arrow.localRelationThreshold``, 48 MB by
default) is no local relation: Spark keeps the Arrow record batches PySpark sent it in the
driver's JVM and reads them in tasks. :func:`held_arrow` finds those batches in the frame's plan;
they come to Python through one local socket without a Spark job (69 MB of drone rows in 60-90 ms,
where ``toArrow``'s job takes 0.7 s on two cores).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from pyhudi.spark.compat import arrow_batches, arrow_schema, collect_arrow, collect_values, serve_bytes

#: the most rows of a one-column local relation collected on the driver, a row of ``n`` columns
#: weighing ``1 + n / 10`` (:func:`fits_driver`): the optimizer evaluates a projection and
#: ``collect`` makes Python rows at about 3 µs a row plus 0.3 µs a value (2,880 drone rows of 15
#: columns: 21 ms to an Arrow table, where ``toArrow``'s job takes 48 ms and a count per path
#: 0.2-0.3 s). Half the break-even with those jobs leaves a margin for slower drivers and wider values
LOCAL_ROWS = 50_000

#: column types whose internal Python values (:func:`~pyhudi.spark.compat.collect_values`) pyarrow
#: turns back into the same Arrow values (:func:`_array`)
_PLAIN = (T.StringType, T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType,
          T.BooleanType, T.BinaryType, T.DateType, T.DecimalType, T.TimestampType, T.TimestampNTZType)


def local_rows(df: DataFrame) -> int | None:
    """The rows of the local relation ``df`` reads, from the analyzed plan Spark already holds (no
    optimizer pass); None when ``df`` reads anything else or more than one relation."""
    leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    if leaves.size() != 1:
        return None
    leaf = leaves.apply(0)
    return int(leaf.data().size()) if leaf.getClass().getSimpleName() == "LocalRelation" else None


def fits_driver(df: DataFrame) -> bool:
    """Whether ``df`` reads a local relation small enough to collect on the driver (:data:`LOCAL_ROWS`)."""
    rows = local_rows(df)
    return rows is not None and rows * (1 + len(df.columns) / 10) <= LOCAL_ROWS


def folds(df: DataFrame) -> bool:
    """Whether Spark's optimizer turns ``df`` into a local relation (evaluating its expressions on
    the driver, where a failing one raises)."""
    return bool(df._jdf.queryExecution().optimizedPlan().getClass().getSimpleName() == "LocalRelation")


def collect_local(df: DataFrame, *, fits: Callable[[DataFrame], bool] | None = None,
                  checked: bool = False) -> pa.Table | None:
    """Every row of ``df`` as an Arrow table typed as :func:`~pyhudi.spark.compat.arrow_schema`
    types them, when ``df`` is a projection of a local relation small enough for the driver
    (:func:`fits_driver`; ``checked``: the caller has asked that of the relation ``df`` projects)
    that the optimizer folds into one (no Spark job unless a column is not a plain value); None,
    having run nothing, otherwise, or when ``fits`` (given the plan to be collected, already
    optimized) says no.

    The optimizer evaluates the projection while planning, once, so an expression that fails on a
    row (a key generator's ``raise_error``) raises here, as a Spark job would."""
    if not checked and not fits_driver(df):
        return None
    if not folds(df) or (fits is not None and not fits(df)):
        return None
    fields = df.schema.fields
    if not all(isinstance(f.dataType, _PLAIN) for f in fields):
        return collect_arrow(df)
    values = collect_values(df)
    schema = arrow_schema(df.schema)
    columns = list(zip(*values)) if values else [()] * len(schema)
    return pa.Table.from_arrays([_array(c, f.type) for c, f in zip(columns, schema)], schema=schema)


def _array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """One column of Spark's internal values: dates as days and timestamps as microseconds since
    the epoch, anything else as the Python value of its Arrow type."""
    if pa.types.is_timestamp(kind):
        return pa.array(values, type=pa.int64()).cast(kind)
    if pa.types.is_date32(kind):
        return pa.array(values, type=pa.int32()).cast(kind)
    return pa.array(values, type=kind)


#: the most partitions (one Arrow batch each) of a held pandas or Arrow frame read on the driver:
#: collecting their batches costs three py4j calls each, about 1 ms (a pandas 3 frame concatenated
#: from one-row frames is sent as one batch per row)
HELD_PARTITIONS = 1024


class HeldArrow:
    """The rows of a frame Spark holds on the driver, as Arrow record batches the JVM serves to
    Python through one local socket without a Spark job, and their size in bytes:

    * a pandas or Arrow frame past the local relation threshold (``ArrowConverters.toDataFrame``:
      a ``LogicalRDD`` reading a ``ParallelCollectionRDD`` of the serialized record batches PySpark
      sent, named ``arrow``): those batches as they are, their size in the driver's heap;
    * a local relation (a smaller pandas frame, SQL ``VALUES``): its rows turned into Arrow by the
      JVM (``ArrowConverters.toBatchIterator``, as ``toArrow``'s tasks do), its size as Spark
      estimates it. For 2,880 drone rows 16 ms, where collecting them as Python values takes 40.

    ``messages`` gives the JVM iterator of the batches and how many batches (pandas frame) or rows
    (local relation) must arrive: a fetch that gets fewer (the serving thread failed) reads nothing.
    """

    def __init__(self, jvm: Any, schema: T.StructType, messages: Callable[[], tuple[Any, int, bool]],
                 nbytes: int, *, local: bool) -> None:
        self.schema = schema
        self.nbytes = nbytes
        self.local = local  # a local relation, whose size is Spark's estimate
        self._jvm = jvm
        self._messages = messages

    def fetch(self) -> pa.Table | None:
        """The rows as one Arrow table typed as :func:`~pyhudi.spark.compat.arrow_schema` types
        the frame's schema; None when not every batch arrived or the batches do not read as that
        schema unambiguously (the caller then lets Spark read the frame).

        PySpark sends strings and binaries with 64-bit offsets when asked to
        (``spark.sql.execution.arrow.useLargeVarTypes``), and a batch carries no schema: the
        batches are read both ways. A wrong width fails validation except in corner cases (batches
        of one or two rows, or whose first rows are empty); where both ways validate and read
        differently, nothing is taken."""
        try:
            items, expected, counts_rows = self._messages()
            try:
                blobs = serve_bytes(self._jvm, items)
            finally:
                _close(items)
        except Py4JError:  # (a JVM without the calls this needs: Spark reads the frame)
            return None
        if not counts_rows and len(blobs) != expected:
            return None
        wanted = arrow_schema(self.schema)
        # (a local relation's batches are made with 32-bit offsets, as asked)
        widths = (wanted,) if counts_rows or not _has_offsets(wanted) else (wanted, _large_offsets(wanted))
        found: list[pa.Table] = []
        for schema in widths:
            try:
                batches = [pa.ipc.read_record_batch(pa.ipc.read_message(pa.py_buffer(b)), schema) for b in blobs]
                for batch in batches:
                    batch.validate(full=True)
            except (pa.ArrowException, ValueError):
                continue
            found.append(pa.Table.from_batches(batches, schema).cast(wanted))
        if not found or (len(found) == 2 and not _same_offsets_columns(*found)):
            return None
        table = found[0]
        return table if not counts_rows or table.num_rows == expected else None


def _close(items: Any) -> None:
    """Free what the JVM iterator ``items`` holds (an Arrow batch iterator made outside a task
    frees its buffers only when read to its end)."""
    try:
        items.close()
    except Py4JError:  # (an iterator with nothing to close)
        pass


def _same_offsets_columns(a: pa.Table, b: pa.Table) -> bool:
    """Whether two readings of the same batches agree where offsets decide the values (the other
    columns are located by the batches themselves; NaN would make whole tables differ)."""
    names = [f.name for f in a.schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)]
    return a.select(names).equals(b.select(names))


def held_arrow(df: DataFrame) -> HeldArrow | None:
    """The rows ``df`` reads when ``df`` is exactly a frame Spark holds on the driver (a pandas or
    Arrow frame, a local relation; no projection over it) of plain columns; None, having read
    nothing, for any other frame."""
    jvm = df.sparkSession.sparkContext._jvm
    if jvm is None or not all(_held_type(f.dataType) for f in df.schema.fields):
        return None
    try:
        plan = df._jdf.queryExecution().analyzed()
        kind = plan.getClass().getSimpleName()
        if kind == "LocalRelation":
            if plan.isStreaming():
                return None
            data = plan.data()
            return HeldArrow(jvm, df.schema,
                             lambda: (arrow_batches(jvm, data.iterator(), plan.schema()), data.size(), True),
                             int(plan.stats().sizeInBytes()), local=True)
        if kind != "LogicalRDD":
            return None
        rdd = plan.rdd()
        if rdd.name() != "arrow" or rdd.dependencies().size() != 1:
            return None
        source = rdd.dependencies().head().rdd()
        if source.getClass().getSimpleName() != "ParallelCollectionRDD":
            return None
        partitions = source.partitions()
        if len(partitions) > HELD_PARTITIONS:
            return None
        nbytes = int(jvm.org.apache.spark.util.SizeEstimator.estimate(partitions))
    except Py4JError:  # a Spark whose classes differ: the frame is read by Spark
        return None

    def messages() -> tuple[Any, int, bool]:
        convert = jvm.scala.collection.JavaConverters
        found = jvm.java.util.ArrayList()
        for part in partitions:  # (references only: no batch crosses py4j)
            found.addAll(convert.seqAsJavaList(part.values()))
        return convert.asScalaIterator(found.iterator()), found.size(), False

    return HeldArrow(jvm, df.schema, messages, nbytes, local=False)


def _held_type(kind: T.DataType) -> bool:
    """A plain column type whose values pyarrow compares as Spark does: strings only with the
    binary collation (Spark 4's others compare case- or accent-insensitively)."""
    if isinstance(kind, T.StringType) and getattr(kind, "collation", "UTF8_BINARY") != "UTF8_BINARY":
        return False
    return isinstance(kind, _PLAIN)


def _has_offsets(schema: pa.Schema) -> bool:
    return any(pa.types.is_string(f.type) or pa.types.is_binary(f.type) for f in schema)


def _large_offsets(schema: pa.Schema) -> pa.Schema:
    def large(kind: pa.DataType) -> pa.DataType:
        return pa.large_string() if pa.types.is_string(kind) else pa.large_binary() if pa.types.is_binary(kind) \
            else kind
    return pa.schema([f.with_type(large(f.type)) for f in schema])
