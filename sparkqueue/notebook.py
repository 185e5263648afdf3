"""Notebook parameters that are Databricks widgets on Databricks and plain defaults elsewhere."""

from __future__ import annotations

import os
from typing import Any


def parameters(dbutils: Any | None, **defaults: str) -> dict[str, str]:
    """Text widgets (created with these defaults) under Databricks; else SPARKQUEUE_<NAME> or the default."""
    if dbutils is None:
        return {
            name: os.environ.get(f"SPARKQUEUE_{name.upper()}", value)
            for name, value in defaults.items()
        }
    for name, value in defaults.items():
        dbutils.widgets.text(name, value)
    return {name: dbutils.widgets.get(name) for name in defaults}
