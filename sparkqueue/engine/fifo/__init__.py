"""FIFO queues: ordered groups, one receiver per group at a time, and deduplication, on either
kind of FIFO table (numbered by the native engine, or by Delta row tracking)."""
