"""What differs between the PySpark versions pyhudi supports (3.5 and 4.x), in one place."""

from __future__ import annotations

import inspect

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

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
