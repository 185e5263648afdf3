"""The scheduled redrive job: `python jobs/redrive.py --once` or under spark-submit / Databricks."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import threading

from sparkqueue import RedriveSettings, spark_session
from sparkqueue.errors import QueueError
from sparkqueue.services.redrive import run_schedule
from sparkqueue.where import Source, Where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="conf/redrive.toml", help="queues and upkeep settings")
    parser.add_argument("--root", help="folder or URI holding the queues (overrides the config)")
    parser.add_argument("--catalog", help="catalog schema holding the queues, e.g. main.queues")
    parser.add_argument("--queues", help="comma-separated queue names (default: the config's)")
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--once", action="store_true", help="run one pass and exit")
    when.add_argument("--every", type=int, metavar="SECONDS", help="run a pass every SECONDS")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("sparkqueue").setLevel(logging.INFO)  # ours, not py4j's chatter

    settings = RedriveSettings.load(args.config)
    if args.every is not None:
        settings = dataclasses.replace(settings, every_seconds=args.every)
    try:
        where = Where.first(  # a job's --catalog, when not empty, wins over its --root
            Source("--catalog", catalog=args.catalog),
            Source("--root", root=args.root),
            Source(args.config, settings.root, settings.catalog),
        )
    except QueueError as error:
        parser.error(error.message)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    queues = args.queues.split(",") if args.queues else None
    broker = where.broker(spark_session())
    run_schedule(broker.context, settings, queues=queues, once=args.once, stop=stop)


if __name__ == "__main__":
    main()
