"""The local session's set-up rules that need no JVM: properties files, the jar cache check and
the lock that lets one process at a time fetch jars into Ivy's cache."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkqueue.session import FETCH_LOCK, delta_maven_coordinate, jars_cached, read_properties


def test_a_properties_file_reads_like_java_properties(tmp_path: Path):
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# comment\nspark.master  local[2]\nspark.a=b=c\nspark.flag\n\n")
    assert read_properties(conf) == {"spark.master": "local[2]", "spark.a": "b=c", "spark.flag": ""}


def test_the_delta_jar_counts_as_cached_only_when_ivy_holds_that_version(tmp_path: Path):
    coordinate = delta_maven_coordinate()  # io.delta:delta-spark_<spark>_2.13:<delta>
    assert not jars_cached(coordinate, tmp_path)
    group, artifact, version = coordinate.split(":")
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / f"{group}_{artifact}-0.0.1.jar").touch()  # another version
    assert not jars_cached(coordinate, tmp_path)
    (tmp_path / "jars" / f"{group}_{artifact}-{version}.jar").touch()
    assert jars_cached(coordinate, tmp_path)


PACKAGES = "io.delta:delta-spark_4.0_2.13:4.0.0"
# A process that starts "a JVM" (`start` here) through one_fetch_at_a_time on the Ivy folder
# argv[1], noting its beginning and end into argv[2] as argv[3]. Between them it "fetches"
# (sleeps argv[4] seconds, then puts the package's jar in the cache), or, given argv[5], waits
# until that other starter has begun (so two starts overlap, however slowly each came up).
STARTER = f"""
import sys, time
from pathlib import Path
from sparkqueue.session import one_fetch_at_a_time

ivy, notes, name, seconds = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
other = sys.argv[5] if len(sys.argv) > 5 else None

def note(line):
    with notes.open("a") as out:
        out.write(line + "\\n")

def start():
    note(f"{{name}} begins")
    if other is None:
        time.sleep(seconds)
        (ivy / "jars").mkdir(parents=True, exist_ok=True)
        (ivy / "jars" / "io.delta_delta-spark_4.0_2.13-4.0.0.jar").touch()
    else:
        deadline = time.monotonic() + seconds
        while f"{{other}} begins" not in notes.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    note(f"{{name}} ends")
    return name

one_fetch_at_a_time(start, ivy, {{"spark.jars.packages": "{PACKAGES}"}})
"""


@contextlib.contextmanager
def starters(ivy: Path, notes: Path, *runs: tuple[str, ...]) -> Iterator[list[subprocess.Popen]]:
    """The starter processes, one per (name, seconds[, other]); killed if still running after."""
    processes = [
        subprocess.Popen([sys.executable, "-c", STARTER, str(ivy), str(notes), *run])
        for run in runs
    ]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait()


def test_starts_that_fetch_jars_run_one_at_a_time_and_later_ones_side_by_side(tmp_path: Path):
    ivy, notes = tmp_path / "ivy", tmp_path / "notes"
    with starters(ivy, notes, ("a", "1"), ("b", "1")) as first:
        assert [process.wait(timeout=120) for process in first] == [0, 0]
    lines = notes.read_text().splitlines()
    assert lines in (
        ["a begins", "a ends", "b begins", "b ends"],
        ["b begins", "b ends", "a begins", "a ends"],
    ), lines

    notes.write_text("")  # fetched once: two more starts meet inside, even while the lock is held
    with (ivy / FETCH_LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with starters(ivy, notes, ("c", "60", "d"), ("d", "60", "c")) as later:
            assert [process.wait(timeout=120) for process in later] == [0, 0]
    assert sorted(notes.read_text().splitlines()[:2]) == ["c begins", "d begins"]


def test_a_marker_without_its_jars_fetches_again_under_the_lock(tmp_path: Path):
    ivy, notes = tmp_path / "ivy", tmp_path / "notes"
    with starters(ivy, notes, ("a", "0")) as [first]:
        assert first.wait(timeout=120) == 0
    shutil.rmtree(ivy / "jars")  # the cache emptied by hand, the marker left behind
    with (ivy / FETCH_LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with starters(ivy, notes, ("b", "0")) as [second]:
            with pytest.raises(subprocess.TimeoutExpired):
                second.wait(timeout=3)  # it waits for the lock
            fcntl.flock(lock, fcntl.LOCK_UN)
            assert second.wait(timeout=120) == 0
    assert notes.read_text().splitlines() == ["a begins", "a ends", "b begins", "b ends"]


def test_a_start_killed_while_it_fetches_leaves_the_fetch_to_the_next(tmp_path: Path):
    ivy, notes = tmp_path / "ivy", tmp_path / "notes"
    with starters(ivy, notes, ("killed", "600")) as [killed]:
        deadline = time.monotonic() + 120
        while not notes.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with starters(ivy, notes, ("next", "0")) as [waiting]:
            time.sleep(0.3)  # `next` waits on the lock
            killed.kill()
            assert killed.wait(timeout=60) == -signal.SIGKILL
            assert waiting.wait(timeout=120) == 0
    assert notes.read_text().splitlines() == ["killed begins", "next begins", "next ends"]
