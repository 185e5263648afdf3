"""The per-message operations (send, receive, delete, visibility, stats, peek, purge, history)
and what receives remember between calls; each runs through rounds/ when it commits."""
