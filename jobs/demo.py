"""The main job: a tour of sparkqueue on the embedded local default (spark-submit or python)."""

from __future__ import annotations

import argparse
import logging

from sparkqueue import spark_session
from sparkqueue.demo import run_demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default="demo-root", help="folder or URI holding the queues")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("sparkqueue").setLevel(logging.INFO)  # ours, not py4j's chatter
    spark = spark_session()
    run_demo(spark, args.root)


if __name__ == "__main__":
    main()
