"""How long the command line and the SQS endpoint take to answer on a local root (no JVM).

    .venv/bin/python benchmarks/native_start.py --runs 5

Times `--runs` runs of `sparkqueue stats Q --root R --json` from the shell (Python's start
included), and `--runs` starts of `sparkqueue serve --root R --port 0` until it prints that it
serves. Prints each and the median.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = str(Path(sys.executable).with_name("sparkqueue"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="sparkqueue-start-")
    subprocess.run(
        [COMMAND, "create", "timed", "--root", root, "--json"], check=True, capture_output=True
    )
    command: list[float] = []
    for _ in range(args.runs):
        started = time.monotonic()
        subprocess.run(
            [COMMAND, "stats", "timed", "--root", root, "--json"], check=True, capture_output=True
        )
        command.append(time.monotonic() - started)
    ready: list[float] = []
    for _ in range(args.runs):
        started = time.monotonic()
        serve = subprocess.Popen(
            [COMMAND, "serve", "--root", root, "--port", "0", "--redrive-every", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert serve.stdout is not None
        line = serve.stdout.readline()
        ready.append(time.monotonic() - started)
        serve.terminate()
        serve.wait(timeout=30)
        assert "serving SQS" in line, line
    for name, values in (("sparkqueue stats", command), ("sparkqueue serve, ready", ready)):
        runs = ", ".join(f"{value:.2f}" for value in values)
        print(f"{name:<24} median {statistics.median(values):.2f} s  ({runs})")


if __name__ == "__main__":
    main()
