"""The benchmark behind the performance bars: `python -m sparkqueue.bench [--smoke] [--only ...]`.

Scenarios: bulk enqueue (`send_df`), bulk drain (`receive_df` + `delete_df`), single-message
`receive(1)`/`delete` latency and its drift, 4 consumer threads with and without a producer, one
redrive pass over a large queue with expired receives, the worker loop (`consume`) at several
batch sizes with 1 and 4 workers, and the buffered client (`receive(1)` latency, 4 consumers on
one client), and the SQS endpoint with 1 and 8 boto3 clients (send, receive, delete). `--only scaling` (not in the default run) measures receive(batch) + delete_batch by batch, threads
and OS processes. `--only chaos` (not in the default run either) kills buffered consumers and redrive jobs,
as OS processes, at random for minutes and checks the records afterwards. Prints a table, writes `bench.json` and `bench.png` (latency
over the run; throughput per scenario) into `--out`.
"""

from .cli import main
from .report import chart, table

__all__ = ["chart", "main", "table"]
