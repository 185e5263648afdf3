"""The only SQL text: identifiers quoted in one place, no value pasted in."""

from __future__ import annotations

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.store import sql


def test_identifiers_are_backticked_with_inner_backticks_doubled():
    assert sql.quote_identifier("message_id") == "`message_id`"
    assert sql.quote_identifier("we`ird") == "`we``ird`"


@pytest.mark.parametrize("path", ["", "  ", "a`b", None, 3])
def test_paths_that_cannot_be_quoted_are_rejected(path):
    with pytest.raises(InvalidParameterValue, match="without backticks"):
        sql.path_table(path)


def test_statements_take_quoted_table_names_and_whole_numbers():
    target = sql.path_table("file:/r/q")
    assert sql.optimize(target, 3) == "OPTIMIZE delta.`file:/r/q` WHERE shard = 3"
    assert sql.vacuum(target, 24) == "VACUUM delta.`file:/r/q` RETAIN 24 HOURS"
    schema = StructType([StructField("name", StringType(), False)])
    assert sql.create_table("`c`.`s`.`t`", schema, ("name",), {"delta.x": "1"}) == (
        "CREATE TABLE IF NOT EXISTS `c`.`s`.`t` (`name` string NOT NULL) USING DELTA"
        " PARTITIONED BY (`name`) TBLPROPERTIES ('delta.x' = '1')"
    )
    with pytest.raises(ValueError):
        sql.set_properties(target, {"delta.x": "it's"})


@pytest.mark.parametrize("location", ["/wh/it's", "C:\\wh"])
def test_locations_that_cannot_be_string_literals_are_rejected(location):
    with pytest.raises(InvalidParameterValue, match="quotes or backslashes"):
        sql.local_table("`c`.`s`.`t`", location)
