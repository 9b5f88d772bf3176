"""Reading file slices without Spark: merging a base file with its log blocks
(:mod:`~pyhudi.read.merge`), the data skipping that rules files out by their column statistics
(:mod:`~pyhudi.read.skipping`), and what the cleaner's retention lets a query still read
(:mod:`~pyhudi.read.retention`). It stands on the timeline, io, config and storage, and imports
neither the metadata table, the table object nor anything above them, nor pyspark.
"""
