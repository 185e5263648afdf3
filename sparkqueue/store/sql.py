"""The only SQL text in the package. Every identifier is quoted here; no user value is ever pasted.

Paths are the broker's own (its root may not contain a backtick) and numbers are formatted from
validated ints, so statements carry no message, attribute or other user text.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import StructType

from ..errors import InvalidParameterValue


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


def table(path: str) -> str:
    """A path table's SQL name."""
    return f"delta.`{check_path(path)}`"


def column_of(path: str, name: str) -> str:
    """How a MERGE condition names a target column: `<path>`.`name` (Spark's own `mergeInto`
    qualifies target columns by the table's name, which for a path table is the path)."""
    return f"`{check_path(path)}`.{quote_identifier(name)}"


def describe_history(path: str, depth: int) -> str:
    return f"DESCRIBE HISTORY {table(path)} LIMIT {int(depth)}"


def describe_detail(path: str) -> str:
    return f"DESCRIBE DETAIL {table(path)}"


def optimize(path: str, shard: int | None = None) -> str:
    where = "" if shard is None else f" WHERE shard = {int(shard)}"
    return f"OPTIMIZE {table(path)}{where}"


def vacuum(path: str, retain_hours: int) -> str:
    return f"VACUUM {table(path)} RETAIN {int(retain_hours)} HOURS"


def delete_all(path: str) -> str:
    return f"DELETE FROM {table(path)}"


def _properties(properties: dict[str, str]) -> str:
    for key, value in properties.items():
        if "'" in key or "'" in value:
            raise ValueError(f"table property {key!r} = {value!r} cannot be quoted")
    return ", ".join(f"'{key}' = '{value}'" for key, value in sorted(properties.items()))


def set_properties(path: str, properties: dict[str, str]) -> str:
    return f"ALTER TABLE {table(path)} SET TBLPROPERTIES ({_properties(properties)})"


def create_table(
    path: str,
    schema: StructType,
    partition_by: tuple[str, ...] = (),
    properties: dict[str, str] | None = None,
) -> str:
    columns = ", ".join(
        f"{quote_identifier(f.name)} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
        for f in schema.fields
    )
    statement = f"CREATE TABLE IF NOT EXISTS {table(path)} ({columns}) USING DELTA"
    if partition_by:
        statement += f" PARTITIONED BY ({', '.join(map(quote_identifier, partition_by))})"
    if properties:
        statement += f" TBLPROPERTIES ({_properties(properties)})"
    return statement
