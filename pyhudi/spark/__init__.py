"""Everything that touches PySpark: the session, the write pipeline and the snapshot reader."""
