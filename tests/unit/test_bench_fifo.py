"""The benchmark's FIFO scenario, tiny, on the native engine: consumers alone, then beside a
producer; every delivery checked."""

from __future__ import annotations

from sparkqueue import Broker
from sparkqueue.bench.fifo import fifo
from sparkqueue.bench.report import table


def test_consumers_alone_and_beside_a_producer_take_nothing_twice_or_out_of_order(tmp_path):
    figures = fifo(Broker(None, str(tmp_path / "root")), seconds=1.0, consumers=2, groups=8)
    alone, beside = figures["fifo_load"], figures["fifo_with_producer"]
    for run in (alone, beside):
        assert run["delivered"] > 0 and run["per_s"] > 0
        assert run["duplicates"] == run["out_of_order"] == 0
    assert alone["sent_during"] == 0 and beside["sent_during"] > 0
    assert figures["fifo_ratio"] == beside["per_s"] / alone["per_s"]
    reported = dict((what, figure) for what, figure, _ in table({"engines": {"native": figures}}))
    assert reported["FIFO consumers, receive(10) + delete_batch (twice / out of order)"].endswith(
        "(0 / 0)"
    )
    assert "FIFO consumers alone / beside a producer" in reported
