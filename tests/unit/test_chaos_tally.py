"""The chaos run's bookkeeping (sparkqueue.bench.chaos): what counts as lost, unsent, or handed
out twice within a visibility window. No JVM: the records are written here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sparkqueue.bench.reckoning import SHARE, TIMEOUT_SECONDS, tally

WINDOW = TIMEOUT_SECONDS * SHARE  # two hand-outs of one message are at least this far apart


def records(folder: Path, sent: list[str], handed: list[tuple[float, str, int]]) -> Path:
    """A run's records: the bodies sent, and each hand-out (time, body, receive count)."""
    (folder / "sent.log").write_text("\n".join(sent) + "\n")
    lines = [f"{at} {body} {count}\n" for at, body, count in handed]
    (folder / "delivered-1.log").write_text("".join(lines[::2]))  # two consumers' files
    (folder / "delivered-2.log").write_text("".join(lines[1::2]))
    return folder


def test_a_clean_run_accounts_for_every_message(tmp_path):
    folder = records(
        tmp_path,
        ["a", "b", "c"],
        [(100.0, "a", 1), (100.0 + WINDOW, "a", 2), (101.0, "b", 1)],  # a came back once
    )
    report = tally(folder, Counter(["c"]), kills=3)  # c never handed out, still queued
    assert (report.sent, report.delivered, report.deleted, report.left) == (3, 3, 2, 1)
    assert (report.lost, report.unsent, report.too_soon) == ([], [], [])


def test_a_message_gone_without_a_hand_out_is_lost_and_a_stranger_is_unsent(tmp_path):
    folder = records(tmp_path, ["a", "b"], [(100.0, "a", 1), (100.0, "x", 1)])
    report = tally(folder, Counter(), kills=0)
    assert (report.lost, report.unsent) == (["b"], ["x"])


def test_one_claim_handed_out_twice_or_two_claims_too_close_are_too_soon(tmp_path):
    folder = records(
        tmp_path,
        ["a", "b", "c"],
        [
            (100.0, "a", 1), (100.5, "a", 1),  # the same claim twice
            (100.0, "b", 1), (100.0 + WINDOW / 2, "b", 2),  # the next claim within the window
            (100.0, "c", 2), (100.0 + WINDOW, "c", 3),  # fine
        ],
    )  # fmt: skip
    assert tally(folder, Counter(), kills=0).too_soon == ["a", "b"]


def test_a_body_on_two_rows_is_doubled(tmp_path):
    """A transaction committed twice leaves one body on two rows: the set of bodies would hide it."""
    folder = records(tmp_path, ["a", "b"], [(100.0, "a", 1)])
    report = tally(folder, Counter({"b": 2}), kills=0)
    assert report.doubled == ["b"] and report.left == 1


def test_a_send_cut_short_by_a_kill_counts_as_sent_where_it_landed(tmp_path):
    """A sender killed between its send's commit and its record: the tables or a hand-out show
    that the send landed; a body that is nowhere was never sent, and is not lost."""
    folder = records(tmp_path, ["a"], [(100.0, "m1", 1)])
    (folder / "sending-job-1.log").write_text("m1\nm2\nm3\n")  # m2 left in the queue, m3 nowhere
    report = tally(folder, Counter(["m2"]), kills=1)
    assert (report.sent, report.lost, report.unsent) == (3, ["a"], [])


def test_a_dead_letter_never_handed_out_is_reported(tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "sent.log").write_text("a\nb\n")
    (folder / "delivered-1.log").write_text("1.0 a 1\n")
    report = tally(folder, Counter({"a": 1, "b": 1}), kills=0, dead={"a", "b"})
    assert report.dead_undelivered == ("b",)
