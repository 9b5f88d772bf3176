"""Hudi's metadata table (``.hoodie/metadata``): what it records (the ``files``, ``column_stats``,
``bloom_filters``, ``record_index`` and ``partition_stats`` partitions, their record keys and
schemas), read without listing storage, and the records a commit adds to it. It stands below
``table`` (which asks it for file listings) and above ``read``, ``timeline`` and ``io``; it must
not import ``table``, ``write``, ``plans``, ``actions`` or anything above, nor pyspark.
"""
