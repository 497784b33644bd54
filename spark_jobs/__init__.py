"""PySpark jobs over pull/hold event logs (see docs/operations.md, The pull event log)."""
