"""Services built on the engine: the redrive job, table upkeep, heartbeats, sinks, the worker loop."""
