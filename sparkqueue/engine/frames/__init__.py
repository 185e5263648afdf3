"""The DataFrame operations (Spark): sending, receiving, deleting and peeking whole DataFrames of
messages, by range where a standard queue allows it and by MERGE keyed on message id where not."""
