"""The benchmark behind the performance bars: `python -m sparkqueue.bench [--smoke] [--only ...]`.

Scenarios: bulk enqueue (`send_df`), bulk drain (`receive_df` + `delete_df`), single-message
`receive(1)`/`delete` latency and its drift, 4 consumer threads with and without a producer, one
redrive pass over a large queue with expired receives, and the worker loop (`consume`) at several
batch sizes with 1 and 4 workers. Prints a table, writes `bench.json` and `bench.png` (latency
over the run; throughput per scenario) into `--out`.
"""

from .cli import main
from .report import chart, table

__all__ = ["chart", "main", "table"]
