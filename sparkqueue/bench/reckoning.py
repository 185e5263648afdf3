"""The chaos scenario's reckoning (chaos.py runs it): what every role recorded in the records
folder, set against what the queue and its dead-letter queue still hold. Every message sent is
accounted for (deleted after a consumer took it, or still in the tables), none was handed out
twice within its visibility window, none is held by two rows, none reached the dead-letter queue
undelivered."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..broker import Broker

QUEUE, DEAD_LETTERS = "chaos", "chaos-dlq"
# Each message's visibility timeout: killed consumers' messages come back after it. It must far
# outlast a claim: with four JVMs on two cores a claim took over 4 s, and with 8 s every prefetch
# arrived with less than half its timeout left and was released again.
TIMEOUT_SECONDS = 30
SHARE = 0.5  # a buffered message is handed out only with this much of its timeout left
# How a role's output (its .out file) notes a receive or a round that raised and was tried again.
FAILED_PREFIXES = ("receive failed", "round failed", "send failed")
# A hand-out is logged just after it happens; on two busy cores a process may pause in between.
CLOCK_SLACK_SECONDS = 1.0
# A chaos or soak report's lists of messages that went wrong, each a problem.
PROBLEMS = ("lost", "unsent", "too_soon", "doubled", "dead_undelivered")


@dataclass(frozen=True)
class ChaosReport:
    sent: int
    delivered: int  # hand-outs, redeliveries included
    deleted: int
    left: int  # still in the queue or its dead-letter queue
    kills: int
    lost: list[str]  # sent, never handed out, and gone
    unsent: list[str]  # in the tables but never sent
    too_soon: list[str]  # handed out twice within a visibility window
    doubled: list[str]  # held by more than one row of the tables at the end
    by_job: int = 0  # of `sent` and of `delivered`, what the Spark job sent and claimed
    dead_undelivered: tuple[str, ...] = ()  # in the dead-letter queue, never handed out
    failed: int = 0  # the roles' receives and rounds that raised (and were tried again)
    run_s: float = 0.0  # from the start to the drain (past `seconds` only while waiting on a job)
    job_ready_s: float | None = None  # when a job had first done a round (with spark work)
    drained: bool = True  # the queue emptied before the drain's deadline


def account(folder: Path, broker: Broker, kills: int) -> ChaosReport:
    """Checks the records against what the queue and its dead-letter queue still hold."""
    left: Counter[str] = Counter()
    for name in (QUEUE, DEAD_LETTERS):
        left.update(_bodies(broker, name))
    return tally(folder, left, kills, dead=set(_bodies(broker, DEAD_LETTERS)))


def _bodies(broker: Broker, name: str) -> list[str]:
    """The bodies of the messages a queue's table holds, one per row (tombstones aside)."""
    record = broker.context.record(name)
    native = broker.context.native
    if native is not None:
        table = native.open(record.location).to_pyarrow_table(columns=["body", "shard"])
        rows = zip(table["body"].to_pylist(), table["shard"].to_pylist(), strict=True)
        return [body for body, shard in rows if shard >= 0]
    rows = broker.context.read(record).where("shard >= 0").select("body").collect()
    return [row.body for row in rows]


def tally(
    folder: Path, rows: Counter[str], kills: int, dead: set[str] | None = None
) -> ChaosReport:
    """The report from the records in `folder` and the bodies still in the tables (`rows`: how
    many rows hold each; `dead`: those of the dead-letter queue)."""
    left = set(rows)
    sent: set[str] = set()
    for path in folder.glob("sent*.log"):
        sent |= set(path.read_text().split())
    maybe: set[str] = set()  # a sender was killed between its send and its record
    for path in folder.glob("sending-*.log"):
        maybe |= set(path.read_text().split()) - sent
    handed: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for path in folder.glob("delivered-*.log"):
        for line in path.read_text().splitlines():
            at, body, count = line.split()
            handed[body].append((float(at), int(count)))
    sent |= maybe & (left | set(handed))  # its send landed: the tables or a hand-out say so
    return ChaosReport(
        sent=len(sent),
        delivered=sum(len(times) for times in handed.values()),
        deleted=len(sent - left),
        left=len(left),
        kills=kills,
        lost=sorted(sent - left - set(handed)),
        unsent=sorted((left | set(handed)) - sent),
        too_soon=sorted(body for body, times in handed.items() if not _apart(times)),
        doubled=sorted(body for body, count in rows.items() if count > 1),
        by_job=len({body for body in sent if body.startswith("job-")})
        + sum(1 for path in folder.glob("delivered-job-*.log") for _ in path.open()),
        dead_undelivered=tuple(sorted((dead or set()) - set(handed))),
        failed=sum(
            1
            for path in folder.glob("*.out")
            for line in path.read_text(errors="replace").splitlines()
            if line.startswith(FAILED_PREFIXES)
        ),
    )


def _apart(times: list[tuple[float, int]]) -> bool:
    """Each claim handed out once, and hand-outs at least a window's guaranteed part apart."""
    ordered = sorted(times, key=lambda pair: pair[1])
    if len({count for _, count in ordered}) < len(ordered):
        return False
    gap = TIMEOUT_SECONDS * SHARE - CLOCK_SLACK_SECONDS
    return all(later[0] - earlier[0] >= gap for earlier, later in pairwise(ordered))


def gone_wrong(report: dict[str, Any]) -> int:
    """The messages a chaos or soak report (as the benchmark's results hold it) lists as gone
    wrong: lost, never sent, handed out too soon or twice, dead-lettered undelivered."""
    return sum(len(report[kind]) for kind in PROBLEMS)


def problems(results: dict[str, Any]) -> int:
    """The messages the benchmark's chaos and soak runs found gone wrong."""
    reports = [results["chaos"]] if "chaos" in results else []
    reports += [results["soak"]["report"]] if "soak" in results else []
    return sum(gone_wrong(report) for report in reports)
