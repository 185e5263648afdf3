"""`python -m sparkqueue.bench`: runs the scenarios, prints the table, writes bench.json/png.

`--only NAME` (repeatable) picks scenarios, `--smoke` shrinks them to seconds; `--help` lists the
scenarios and every size (each a field of `Sizes`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ..engine.messages import compaction, tenants
from ..session import spark_session
from .chart import chart
from .peers import DSN_VARIABLE
from .reckoning import problems
from .report import table
from .scenarios import DEFAULT_SCENARIOS, ENGINES, NAMED_ONLY, SCENARIOS, SMOKE, Sizes, run

# The brokers' threads that may still work on a table after the run, and how long the removal
# of the run's root waits for them.
BACKGROUND_THREADS = (compaction.THREAD_PREFIX, tenants.THREAD_PREFIX)
BACKGROUND_WAIT_SECONDS = 30.0


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes: a check that runs in seconds"
    )
    parser.add_argument("--master", help="run against this cluster (spark://host:7077)")
    parser.add_argument(
        "--root",
        help="where the queues go, kept after the run (default: a fresh temporary folder, removed"
        " after a run that ends well)",
    )
    parser.add_argument(
        "--object-store",
        metavar="URI",
        help="also run the per-message scenarios natively under this root (s3://bucket/prefix,"
        " abfss://container@account.dfs.core.windows.net/prefix; credentials from the"
        " environment, as delta-rs reads them), and there the shared scenario: a"
        " Spark-session broker's receives and consumers beside Spark's send_df",
    )
    parser.add_argument("--out", default="bench-results", help="folder for bench.json/png")
    parser.add_argument(
        "--pgmq-dsn",
        metavar="DSN",
        default=os.environ.get(DSN_VARIABLE),
        help=f"the peers scenario's PostgreSQL with PGMQ installed (default: ${DSN_VARIABLE};"
        " without it, PGMQ's row says not installed)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=SCENARIOS,
        help=f"run only this scenario (repeatable; default: all but {', '.join(NAMED_ONLY)})",
    )
    parser.add_argument(
        "--engine",
        action="append",
        choices=ENGINES,
        help="run the per-message scenarios on this engine (repeatable; default: both)",
    )
    for field in fields(Sizes):
        option, kind = f"--{field.name.replace('_', '-')}", type(field.default)
        parser.add_argument(option, type=kind, help=f"default {field.default}")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    changes = {f.name: getattr(args, f.name) for f in fields(Sizes)}
    sizes = replace(sizes, **{name: value for name, value in changes.items() if value is not None})
    conf = {"spark.master": args.master} if args.master else {}
    # On object storage the session commits as the native engine does: both share the root.
    spark = spark_session(storage_options={} if args.object_store else None, **conf)
    made = not args.root  # a folder of the run's own: some 300 MB after the redrive scenario
    root = args.root or tempfile.mkdtemp(prefix="sparkqueue-bench-")
    scenarios = args.only or DEFAULT_SCENARIOS
    engines = args.engine or ENGINES
    try:
        results = run(spark, root, sizes, scenarios, engines, args.object_store, args.pgmq_dsn)
    except BaseException:  # what a failed run left (chaos and soak records among it) is kept
        if made:
            _keep(root)
        raise
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    chart(results, out / "bench.png")
    for what, figure, bar in table(results):
        print(f"{what:<34} {figure:>32}   bar {bar}")
    if made and problems(results):  # the chaos and soak records tell what went wrong
        _keep(root)
    elif made:
        _remove(root)
    return results


def _keep(root: str) -> None:
    print(f"the run's queues and records are kept in {root}", file=sys.stderr)


def _remove(root: str) -> None:
    """Removes the run's own root once the brokers' background threads have ended: a
    compaction beside producers or a tenant count may still be on a table of it (each under a
    second), and would make its folders again. The wait is bounded: such a thread that outlived
    it would hold the interpreter's exit anyway."""
    deadline = time.monotonic() + BACKGROUND_WAIT_SECONDS
    for thread in threading.enumerate():
        if thread.name.startswith(BACKGROUND_THREADS) and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    shutil.rmtree(root, ignore_errors=True)
