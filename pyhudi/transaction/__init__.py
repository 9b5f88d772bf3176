"""Writers side by side: heartbeats, the table lock, the concurrency options of a writer and
conflict resolution at commit. Completing an instant under the lock is :mod:`pyhudi.commit`,
which builds on this package; this package imports ``plans``, ``write`` and the layers below,
never ``actions``, ``commit``, ``services`` or ``spark``, and never pyspark.
"""
