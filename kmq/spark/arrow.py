"""Schemas built in Python (workers have no JVM to parse DDL) and their Arrow form.

Spark checks Arrow batches returned by Python code against its own Arrow
conversion of the declared schema and rejects any other, so batches are
always built with :func:`arrow_schema` of the declared ``StructType``.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DoubleType,
                               IntegerType, LongType, StringType, StructField, StructType)

LONG, INT, STRING, BINARY, DOUBLE, BOOL = (LongType(), IntegerType(), StringType(), BinaryType(),
                                           DoubleType(), BooleanType())


def struct(*fields: tuple[str, DataType]) -> StructType:
    """``struct(("a", LONG), ("b", STRING))``: a StructType of nullable fields."""
    return StructType([StructField(name, kind) for name, kind in fields])


def array_of(*fields: tuple[str, DataType]) -> ArrayType:
    return ArrayType(struct(*fields))


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``schema`` (UTC timestamps)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
