"""The benchmark's fairness scenario, tiny, on the native engine: its three runs, the two through
the SQS endpoint, the single tenant's load, and the rows it reports."""

from __future__ import annotations

from sparkqueue import Broker
from sparkqueue.bench import fair as fair_module
from sparkqueue.bench.fair import fair
from sparkqueue.bench.report import table


def test_the_fairness_scenario_times_each_tenants_wait_and_a_single_tenants_load(tmp_path):
    figures = fair(Broker(None, str(tmp_path / "root")), seconds=1.0, consumers=2, tenants=2,
                   rate=20.0, work_ms=1.0, load_seconds=0.5)  # fmt: skip
    for run in ("quiet_alone", "endpoint_quiet_alone"):
        assert figures[run]["quiet"]["received"] > 0, figures[run]
    # A second on a busy machine may hand the consumers a few of the noisy tenant's messages alone
    # (five in six of those sent): each kind's figures are there, and someone was served.
    for run in ("noisy_fair", "noisy_unfair", "endpoint_noisy_fair"):
        kinds = [figures[run]["quiet"], figures[run]["noisy"]]
        assert sum(kind["received"] for kind in kinds) > 0, figures[run]
    for run in ("quiet_alone", "noisy_fair", "noisy_unfair", "endpoint_quiet_alone",
                "endpoint_noisy_fair"):  # fmt: skip
        for kind in ("quiet", "noisy") if "noisy" in run else ("quiet",):
            assert 0 <= figures[run][kind]["p50_s"] <= figures[run][kind]["p99_s"], figures[run]
        assert figures[run]["taken_per_s"] > 0 and figures[run]["quiet_sent_per_s"] > 0
        settled = figures[run]["quiet_settled"]  # none sent that late in a second's run
        assert settled["received"] == 0 <= settled["p99_s"], figures[run]
    assert "noisy" not in figures["quiet_alone"]
    assert figures["single_tenant_per_s"] > 0 and figures["ungrouped_per_s"] > 0
    reported = {
        what: figure for what, figure, _ in table({"engines": {"native": {"fair": figures}}})
    }
    assert "x alone; consumers took " in reported["fair: quiet p50 / p99 beside a noisy tenant"]
    assert "msg/s" in reported["one tenant / no groups, receive(10) + delete_batch"]
    over = reported["fair over the SQS endpoint: quiet p50 / p99 alone; beside a noisy tenant"]
    assert "x alone; consumers take" in over and "beside the noisy tenant consumers took" in over
    # a second's runs send nothing after the settled figures' start: none to report, no ratio
    late = reported["fair: quiet p99 alone / beside a noisy tenant, sent after 4 s"]
    assert late.count("n/a (no message sent that late)") == 2, late


def test_the_settled_figures_are_of_the_messages_sent_after_the_runs_start(tmp_path, monkeypatch):
    monkeypatch.setattr(fair_module, "SETTLED_SECONDS", 0.5)
    run = fair_module.fair_run(Broker(None, str(tmp_path / "root")), "late", 1.5, 2, tenants=2,
                               rate=20.0, work_ms=1.0, noisy=False, fair=True)  # fmt: skip
    assert 0 < run["quiet_settled"]["received"] < run["quiet"]["received"], run
