"""The only SQL text in the package. Every identifier is quoted here; no user value is ever pasted.

Table names come quoted from tables.Table.sql (paths are the broker's own and may not contain a
backtick; catalog names are checked part by part) and numbers are formatted from validated ints,
so statements carry no message, attribute or other user text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidParameterValue

if TYPE_CHECKING:
    from pyspark.sql.types import StructField, StructType


def check_path(path: Any, what: str = "path") -> str:
    """A table path or URI we can quote: non-empty and without backticks."""
    if not isinstance(path, str) or not path.strip() or "`" in path:
        raise InvalidParameterValue(
            f"{what} must be a non-empty path or URI without backticks; got {path!r}"
        )
    return path


def check_column(name: Any, what: str = "column") -> str:
    """A user-named column we can quote and Delta can MERGE on: a non-empty str, no backtick."""
    if not isinstance(name, str) or not name or "`" in name:
        raise InvalidParameterValue(f"{what} must be a column name without backticks; got {name!r}")
    return name


def quote_identifier(name: str) -> str:
    """A column name as Spark reads it in expressions: backticked, inner backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def path_table(path: str) -> str:
    """A path table's SQL name."""
    return f"delta.`{check_path(path)}`"


def local_table(name: str, location: str) -> str:
    """Registers in this process's catalog a table another process created (see tables.py)."""
    return f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION '{check_location(location)}'"


def check_location(location: str) -> str:
    """A location we can put in a SQL string literal: no quote, no backslash."""
    if "'" in location or "\\" in location:
        raise InvalidParameterValue(
            f"a table location must not contain quotes or backslashes; got {location!r}"
        )
    return location


def create_schema(schema: str) -> str:
    return f"CREATE SCHEMA IF NOT EXISTS {schema}"


def describe_schema(schema: str) -> str:
    return f"DESCRIBE SCHEMA EXTENDED {schema}"


def describe_history(target: str, depth: int) -> str:
    return f"DESCRIBE HISTORY {target} LIMIT {int(depth)}"


def describe_detail(target: str) -> str:
    return f"DESCRIBE DETAIL {target}"


def optimize(target: str, shard: int | None = None) -> str:
    where = "" if shard is None else f" WHERE shard = {int(shard)}"
    return f"OPTIMIZE {target}{where}"


def vacuum(target: str, retain_hours: int) -> str:
    return f"VACUUM {target} RETAIN {int(retain_hours)} HOURS"


def drop_table(target: str) -> str:
    return f"DROP TABLE IF EXISTS {target}"


def delete_all(target: str) -> str:
    return f"DELETE FROM {target}"


def _properties(properties: dict[str, str]) -> str:
    for key, value in properties.items():
        if "'" in key or "'" in value:
            raise ValueError(f"table property {key!r} = {value!r} cannot be quoted")
    return ", ".join(f"'{key}' = '{value}'" for key, value in sorted(properties.items()))


def set_properties(target: str, properties: dict[str, str]) -> str:
    return f"ALTER TABLE {target} SET TBLPROPERTIES ({_properties(properties)})"


def create_table(
    target: str,
    schema: StructType,
    partition_by: tuple[str, ...] = (),
    properties: dict[str, str] | None = None,
) -> str:
    columns = ", ".join(
        f"{quote_identifier(f.name)} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
        for f in schema.fields
    )
    statement = f"CREATE TABLE IF NOT EXISTS {target} ({columns}) USING DELTA"
    if partition_by:
        statement += f" PARTITIONED BY ({', '.join(map(quote_identifier, partition_by))})"
    if properties:
        statement += f" TBLPROPERTIES ({_properties(properties)})"
    return statement


def add_columns(target: str, fields: list[StructField]) -> str:
    """Adds nullable columns a newer schema has and an older table lacks."""
    columns = ", ".join(f"{quote_identifier(f.name)} {f.dataType.simpleString()}" for f in fields)
    return f"ALTER TABLE {target} ADD COLUMNS ({columns})"
