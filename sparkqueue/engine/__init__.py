"""The queue engine: send, claim, acknowledge, visibility, inspect, FIFO and moves, each a set of
functions over a `QueueContext` and a queue's `QueueRecord`."""
