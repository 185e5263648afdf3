"""The tables' schemas as Spark types, built from the one definition of their columns (schema.py)."""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..model import MESSAGE_FIELDS
from .schema import CLAIMS_COLUMNS, MESSAGE_COLUMNS, METRICS_COLUMNS, REGISTRY_COLUMNS, Columns

_SPARK_TYPES = {
    "int": IntegerType(),
    "long": LongType(),
    "string": StringType(),
    "map": MapType(StringType(), StringType()),
    "timestamp": TimestampType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
}


def spark_schema(columns: Columns) -> StructType:
    return StructType([StructField(n, _SPARK_TYPES[t], nullable) for n, t, nullable in columns])


MESSAGE_SCHEMA = spark_schema(MESSAGE_COLUMNS)
ATTRIBUTES_TYPE = MESSAGE_SCHEMA["attributes"].dataType
# What receive_df returns and the worker loop hands to a handler: one column per Message field.
MESSAGE_FRAME_COLUMNS: Columns = tuple(
    next(column for column in MESSAGE_COLUMNS if column[0] == name) for name in MESSAGE_FIELDS
)
MESSAGE_FRAME_SCHEMA = spark_schema(MESSAGE_FRAME_COLUMNS)
CLAIMS_SCHEMA = spark_schema(CLAIMS_COLUMNS)
REGISTRY_SCHEMA = spark_schema(REGISTRY_COLUMNS)
METRICS_SCHEMA = spark_schema(METRICS_COLUMNS)
