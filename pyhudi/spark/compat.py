"""What differs between the PySpark versions pyhudi supports (3.5 and 4.x), in one place."""

from __future__ import annotations

import contextlib
import inspect
import io
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.serializers import BatchedSerializer, CPickleSerializer, NoOpSerializer
from pyspark.sql import Column, DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

try:  # PySpark 4: (socket file, socket)
    from pyspark.util import _create_local_socket
except ImportError:  # PySpark 3.5: the socket file alone
    from pyspark.rdd import _create_local_socket  # type: ignore[attr-defined,no-redef,unused-ignore]

#: PySpark 4 asks for the time zone of timestamp columns; 3.5 always made them UTC
_TAKES_TIMEZONE = "timezone" in inspect.signature(to_arrow_schema).parameters


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema, timestamps as UTC microseconds (as Spark hands them to
    ``mapInArrow`` with the session time zone pyhudi sets)."""
    if _TAKES_TIMEZONE:
        return to_arrow_schema(schema, timezone="UTC")  # type: ignore[call-arg,unused-ignore]
    return to_arrow_schema(schema)


def collect_arrow(df: DataFrame) -> pa.Table:
    """Every row of ``df`` on the driver as one Arrow table, in one Spark job, typed as
    :func:`arrow_schema` types them (PySpark 4: ``toArrow``; 3.5: ``_collect_as_arrow``)."""
    schema = arrow_schema(df.schema)
    if hasattr(DataFrame, "toArrow"):  # PySpark 4.0+
        return df.toArrow().cast(schema)
    batches = df._collect_as_arrow()  # type: ignore[operator,unused-ignore]
    return pa.Table.from_batches(batches).cast(schema) if batches else schema.empty_table()


def collect_values(df: DataFrame) -> list[tuple[Any, ...]]:
    """Every row of ``df`` as a tuple of Spark's internal Python values, as ``collect`` brings them
    (no Spark job for a local relation) but without making ``Row`` objects: dates come as days and
    timestamps as microseconds since the epoch, as the JVM sends them, where ``Row`` would make
    ``date`` and local-time ``datetime`` objects (a third of a small batch's collect time)."""
    with _served(df._jdf.collectToPython()) as sockfile:
        return list(BatchedSerializer(_ValueRows()).load_stream(sockfile))


@contextlib.contextmanager
def _served(sock_info: Any) -> Iterator[Any]:
    """The file of the local socket a JVM server described by ``sock_info`` serves, closed after."""
    made = _create_local_socket(sock_info)
    sockfile, sock = made if isinstance(made, tuple) else (made, None)
    try:
        yield sockfile
    finally:
        sockfile.close()
        if sock is not None:
            sock.close()


def serve_bytes(jvm: Any, items: Any) -> list[bytes]:
    """The byte arrays a JVM (Scala) iterator ``items`` yields, through one local socket
    (``PythonRDD.serveIterator``, as ``collect`` serves rows): py4j would copy each through its
    text protocol, about 20x slower for tens of megabytes."""
    with _served(jvm.org.apache.spark.api.python.PythonRDD.serveIterator(items, "pyhudi-serve-bytes")) as sockfile:
        return list(NoOpSerializer().load_stream(sockfile))


def arrow_batches(jvm: Any, rows: Any, schema: Any) -> Any:
    """A JVM iterator of Arrow record batches (serialized, no schema) of the JVM iterator of
    internal rows ``rows`` of Spark schema ``schema``, timestamps as UTC microseconds; made on the
    driver, outside any task (``ArrowConverters.toBatchIterator``: Spark 4 takes whether to use
    64-bit offsets, 3.5 does not; the form this JVM has is found by calling it, once). A Py4JError
    when neither form exists."""
    global _BATCH_ITERATOR_ARGS
    converters = getattr(getattr(jvm.org.apache.spark.sql.execution.arrow, "ArrowConverters$"), "MODULE$")
    forms = {7: (rows, schema, 10_000, "UTC", True, False, None), 6: (rows, schema, 10_000, "UTC", True, None)}
    if _BATCH_ITERATOR_ARGS is not None:
        return converters.toBatchIterator(*forms[_BATCH_ITERATOR_ARGS])
    try:
        made = converters.toBatchIterator(*forms[7])
        _BATCH_ITERATOR_ARGS = 7
    except Py4JError:  # ("method does not exist": nothing was called)
        made = converters.toBatchIterator(*forms[6])
        _BATCH_ITERATOR_ARGS = 6
    return made


#: how many arguments this JVM's ``ArrowConverters.toBatchIterator`` takes, once known
_BATCH_ITERATOR_ARGS: int | None = None


def long_array_literal(sc: SparkContext, values: np.ndarray) -> Column:
    """An ``array<bigint>`` literal (no nulls) of ``values``, made in the JVM from their bytes in a
    few py4j calls (``F.lit`` of a list costs one per element). Its value is an ``UnsafeArrayData``,
    one primitive array: tasks deserialize it as bytes, where ``functions.lit`` of a ``long[]``
    boxes every element, and plans print it by name, not element by element. Spark 4 makes a
    Column of a Catalyst expression through ``classic.ExpressionUtils``; 3.5 by its constructor."""
    jvm, gateway = sc._jvm, sc._gateway
    assert jvm is not None and gateway is not None
    data = np.ascontiguousarray(values, dtype=">i8")
    longs = gateway.new_array(jvm.long, len(data))
    jvm.java.nio.ByteBuffer.wrap(bytearray(data.tobytes())).asLongBuffer().get(longs)
    expressions = jvm.org.apache.spark.sql.catalyst.expressions
    types = jvm.org.apache.spark.sql.types.DataTypes
    literal = expressions.Literal(expressions.UnsafeArrayData.fromPrimitiveArray(longs),
                                  types.createArrayType(types.LongType, False))
    try:  # Spark 4
        return Column(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(literal))
    except (Py4JError, TypeError):  # Spark 3.5 (no such class: py4j's package is not callable)
        return Column(jvm.org.apache.spark.sql.Column(literal))


def _values(*values: Any) -> tuple[Any, ...]:
    return values


class _ValueUnpickler(pickle.Unpickler):
    """Reads the JVM's pickled rows as tuples: the JVM names PySpark's row maker, applied to the
    schema's JSON, for every row; here the schema is not parsed and the maker returns the values."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "pyspark.sql.types" and name == "_create_row_inbound_converter":
            return lambda _schema: _values
        if module == "pyspark.sql.types" and name == "_parse_datatype_json_string":
            return lambda _json: None
        return super().find_class(module, name)


class _ValueRows(CPickleSerializer):
    def loads(self, obj: bytes, encoding: str = "bytes") -> Any:
        return _ValueUnpickler(io.BytesIO(obj), encoding=encoding).load()
