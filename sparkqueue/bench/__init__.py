"""The benchmark behind the performance bars, and every other measurement of the project:
`python -m sparkqueue.bench [--smoke] [--only NAME ...]` (docs/performance.md).

The default run: bulk enqueue (`send_df`) and drain (`receive_df` + `delete_df`), single-message
`receive(1)`/`delete` latency and its drift, 4 consumer threads with and without a producer, FIFO
consumers with and without a producer, the buffered client, one redrive pass over a large queue
with expired receives, the worker loop (`consume`) at several batch sizes with 1 and 4 workers,
the SQS endpoint with 1 and 8 boto3 clients, Celery through it, the history's price, the console's
pages, a native operation phase by phase (`phases`), and the command line's and `serve`'s start
(`start`).

Run only when named (each takes minutes, or measures others): `checkpoints` (latency per
checkpoint interval), `day` (latency after a simulated day of traffic), `upkeep` (table growth
pass by pass), `peers` (moto's SQS server and PGMQ, with our workload shapes), `scaling`
(receive(batch) + delete_batch by batch, threads and OS processes) and `chaos` (consumers and the
redrive job killed at random for minutes, every record checked). Each scenario's module says what
it measures and how to run it. Prints a table, writes `bench.json` and `bench.png` (latency over
the run; throughput per scenario) into `--out`.
"""

from .chart import chart
from .cli import main
from .report import table

__all__ = ["chart", "main", "table"]
