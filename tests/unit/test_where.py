"""Where the queues are: the first source naming a root or a catalog schema wins; one source
naming both is an error, as is none naming either."""

from __future__ import annotations

import pytest

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.services.settings import RedriveSettings
from sparkqueue.where import Source, Where


def test_the_first_source_that_names_a_location_wins():
    where = Where.first(
        Source("--root/--catalog"),
        Source("$SPARKQUEUE_ROOT/$SPARKQUEUE_CATALOG", catalog="main.queues"),
        Source("conf/redrive.toml", root="demo-root"),
    )
    assert where == Where(catalog="main.queues")
    assert Where.first(Source("flags", root="/r", catalog="")) == Where(root="/r")


def test_a_non_empty_catalog_parameter_wins_over_a_default_root():
    sources = [Source("catalog", catalog="main.queues"), Source("root", root="/tmp/q")]
    assert Where.first(*sources) == Where(catalog="main.queues")
    assert Where.first(Source("catalog", catalog=""), sources[1]) == Where(root="/tmp/q")


def test_both_at_once_or_neither_is_a_clear_error():
    with pytest.raises(InvalidParameterValue, match="give one"):
        Where.first(Source("--root/--catalog", root="/r", catalog="main.q"))
    with pytest.raises(InvalidParameterValue, match="give one in --root/--catalog, conf"):
        Where.first(Source("--root/--catalog"), Source("conf"))


def test_the_settings_file_may_name_a_catalog(tmp_path):
    path = tmp_path / "redrive.toml"
    path.write_text('catalog = "main.queues"\nevery_seconds = 30\n')
    settings = RedriveSettings.load(path)
    assert (settings.root, settings.catalog) == (None, "main.queues")
