"""Indexes: how a write finds the file group holding each incoming record key.

The per-file work of each index (footer key ranges, bloom checks, bucket hashing) lives here as
plain pyarrow code; ``pyhudi.spark.index`` distributes it.
"""

#: extraMetadata entry of a commit holding the index statistics of its write, as JSON
INDEX_STATS_KEY = "pyhudi.index.stats"
