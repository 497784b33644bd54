"""PySpark jobs over pull/hold event logs (see DESIGN.md, Pull/hold event)."""
