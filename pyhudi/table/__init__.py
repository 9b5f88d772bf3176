"""One Hudi table as a Python object: :class:`~pyhudi.table.table.HudiTable` (properties,
timeline, schema, file listing), the file-system view of file groups and slices built from file
names and the timeline (:mod:`~pyhudi.table.fs_view`), and the planning of incremental queries
(:mod:`~pyhudi.table.incremental`). Besides creating a table and updating its properties, it
only reads a table's state. It may import the metadata table, readers, timeline, io, config and
storage below it, never ``write``, ``index``, ``keygen`` or anything above them, and never
pyspark.
"""
