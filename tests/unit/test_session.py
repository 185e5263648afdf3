"""The local session's set-up rules that need no JVM: properties files, the jar cache check and
the lock that lets one process at a time fetch jars into Ivy's cache."""

from __future__ import annotations

import fcntl
import signal
import subprocess
import sys
import time
from pathlib import Path

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


# A process that starts "a JVM" (`start` here: it notes its beginning and end, a second apart)
# through one_fetch_at_a_time, on the Ivy folder argv[1], noting into argv[2] as argv[3].
STARTER = """
import sys, time
from pathlib import Path
from sparkqueue.session import one_fetch_at_a_time

ivy, notes, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

def start():
    with notes.open("a") as out:
        out.write(f"{name} begins\\n")
    time.sleep(1)
    with notes.open("a") as out:
        out.write(f"{name} ends\\n")
    return name

one_fetch_at_a_time(start, ivy, "io.delta:delta-spark_4.0_2.13:4.0.0")
"""


def _starter(ivy: Path, notes: Path, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", STARTER, str(ivy), str(notes), name])


def test_starts_that_fetch_jars_run_one_at_a_time_and_later_ones_side_by_side(tmp_path: Path):
    ivy, notes = tmp_path / "ivy", tmp_path / "notes"
    first = [_starter(ivy, notes, name) for name in ("a", "b")]
    assert [process.wait(timeout=60) for process in first] == [0, 0]
    lines = notes.read_text().splitlines()
    assert lines in (
        ["a begins", "a ends", "b begins", "b ends"],
        ["b begins", "b ends", "a begins", "a ends"],
    ), lines

    notes.unlink()  # fetched once: two more starts overlap, even while the lock is held
    with (ivy / FETCH_LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        later = [_starter(ivy, notes, name) for name in ("c", "d")]
        assert [process.wait(timeout=60) for process in later] == [0, 0]
    assert notes.read_text().splitlines()[:2] in (
        ["c begins", "d begins"],
        ["d begins", "c begins"],
    )


def test_a_start_killed_while_it_fetches_leaves_the_fetch_to_the_next(tmp_path: Path):
    ivy, notes = tmp_path / "ivy", tmp_path / "notes"
    killed = _starter(ivy, notes, "killed")
    deadline = time.monotonic() + 60
    while not notes.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    waiting = _starter(ivy, notes, "next")
    time.sleep(0.3)  # `next` waits on the lock
    killed.kill()
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert waiting.wait(timeout=60) == 0
    assert notes.read_text().splitlines() == ["killed begins", "next begins", "next ends"]
