"""The benchmark's drivers scenario, tiny: a real Spark driver process draining one queue with
`receive_df` + `delete_df` beside native consumers in this one; every delivery checked. (Its
cells of several drivers start their processes as the scaling scenario's do, tested there.)"""

from __future__ import annotations

import pytest

from sparkqueue.bench.drivers import BESIDE, drivers
from sparkqueue.bench.report import table

pytestmark = pytest.mark.usefixtures("quick_drivers")


def test_a_driver_and_native_consumers_drain_one_queue_and_take_nothing_twice(tmp_path):
    [beside] = drivers(str(tmp_path / "root"), 200, 2.0, 1, processes=())
    assert (beside["drivers"], beside["cores"], beside["beside"]) == (1, 1, BESIDE)
    assert beside["received"] >= 200 and beside["beside_per_s"] > 0  # the warm-up at least
    assert beside["duplicates"] == 0
    [reported] = [what for what, _, _ in table({"drivers": [beside]})]
    assert reported == (
        f"receive_df + delete_df: batch 200, 1 Spark driver, local[1], {BESIDE} native"
        " consumers beside"
    )
