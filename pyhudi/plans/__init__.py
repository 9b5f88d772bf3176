"""The plans of table services as Hudi records them on the timeline, and their readers:
compaction plans (``T.compaction.requested``), clustering plans (``T.replacecommit.requested``;
``T.clustering.requested`` from table version 8) and what they mean for writes touching planned
file groups, clean plans and the last clean's record, and savepoints with the files they keep. A
plan is data: this package reads and describes
plans but neither decides when to make one (:mod:`pyhudi.services`) nor executes one
(:mod:`pyhudi.actions`). It may import ``write`` and the layers below it, never ``transaction``,
``actions``, ``commit``, ``services`` or ``spark``, and never pyspark.
"""
