"""Executing a plan, the work between a requested instant and its completion: rollback of failed
writes (:mod:`~pyhudi.actions.rollback`), deleting the files of a clean plan
(:mod:`~pyhudi.actions.clean`), compacting one planned file slice (:mod:`~pyhudi.actions.compaction`)
and the row order a clustering writes (:mod:`~pyhudi.actions.ordering`). What to plan and when
belongs to :mod:`pyhudi.services`, and the Spark distribution of the work to ``pyhudi.spark``.

An action ends by completing its instant through the ``complete`` step it is handed
(:class:`pyhudi.timeline.completion.Complete`): the data table's commit point, or the metadata
table's plain completion when it maintains itself. It may import ``transaction``, ``plans``,
``write`` and the layers below, never ``commit``, ``services`` or ``spark``, and never pyspark.
"""
