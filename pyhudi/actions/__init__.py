"""Executing a plan, the work between a requested instant and its completion: rollback of failed
writes (:mod:`~pyhudi.actions.rollback`), deleting the files of a clean plan
(:mod:`~pyhudi.actions.clean`), compacting one planned file slice (:mod:`~pyhudi.actions.compaction`)
and the row order a clustering writes (:mod:`~pyhudi.actions.ordering`). What to plan and when
belongs to :mod:`pyhudi.services`, and the Spark distribution of the work to ``pyhudi.spark``.
It may import ``transaction``, ``plans``, ``write`` and the layers below, never ``commit``,
``services`` or ``spark``, and never pyspark.
"""
