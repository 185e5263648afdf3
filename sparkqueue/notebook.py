"""Notebook parameters: Databricks widgets in a notebook, command-line options when the same file
runs as a Python script task, plain defaults elsewhere."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from .broker import Broker
from .where import Source, Where


def parameters(dbutils: Any | None, **defaults: str) -> dict[str, str]:
    """Text widgets (created with these defaults) under Databricks; else `--name value` options on
    the command line (a job's script task), then SPARKQUEUE_<NAME>, then the default."""
    if dbutils is None:
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        for name in defaults:
            parser.add_argument(f"--{name}")
        given, _ = parser.parse_known_args(sys.argv[1:])
        return {
            name: getattr(given, name) or os.environ.get(f"SPARKQUEUE_{name.upper()}", value)
            for name, value in defaults.items()
        }
    for name, value in defaults.items():
        dbutils.widgets.text(name, value)
    return {name: dbutils.widgets.get(name) for name in defaults}


def open_broker(spark: SparkSession, params: dict[str, str]) -> Broker:
    """The broker a notebook's `catalog` parameter names, or when that is empty its `root`."""
    where = Where.first(
        Source("the catalog parameter", catalog=params.get("catalog")),
        Source("the root parameter", root=params.get("root")),
    )
    return where.broker(spark)
