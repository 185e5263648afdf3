"""The redrive job's settings file, and table properties defined once for creation and upkeep."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings
from sparkqueue.store.schema import QUEUE_TABLE_PROPERTIES

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_config_loads():
    settings = RedriveSettings.load(REPO / "conf" / "redrive.toml")
    assert settings.every_seconds == 60
    assert settings.queues is None


def test_per_queue_settings_inherit_the_defaults(tmp_path):
    config = tmp_path / "redrive.toml"
    config.write_text(
        "[defaults]\nfile_retention_hours = 12\n[queues.orders]\nupkeep_every_seconds = 60\n"
    )
    settings = RedriveSettings.load(config)
    assert settings.upkeep_for("orders") == UpkeepSettings(
        upkeep_every_seconds=60, file_retention_hours=12
    )
    assert settings.upkeep_for("other") == UpkeepSettings(file_retention_hours=12)


@pytest.mark.parametrize(
    "text",
    [
        "colour = 1\n",
        "[defaults]\nshade = 1\n",
        "[defaults]\nfile_retention_hours = 72\n",  # longer than the log's 48 hours
        "[defaults]\nlocal_log_minutes = -1\n",
    ],
)
def test_bad_settings_are_rejected(tmp_path, text):
    config = tmp_path / "redrive.toml"
    config.write_text(text)
    with pytest.raises(InvalidParameterValue):
        RedriveSettings.load(config)


def test_new_tables_get_exactly_what_default_upkeep_would_write():
    """Otherwise the first upkeep would make a metadata commit that aborts every reader."""
    wanted = UpkeepSettings().table_properties()
    assert {key: QUEUE_TABLE_PROPERTIES[key] for key in wanted} == wanted
