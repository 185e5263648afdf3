"""Storage: table layouts, the only SQL text, MERGE/UPDATE/DELETE on classic and Connect sessions,
transactions with conflict retries, cross-process locking for local roots, and the registry."""
