"""The executor and driver work of a write that needs no Spark: where each record goes
(:mod:`~pyhudi.write.plan`, :mod:`~pyhudi.write.bulk_insert`), the handles that write base files
and log blocks (:mod:`~pyhudi.write.handles`, :mod:`~pyhudi.write.append`,
:mod:`~pyhudi.write.partition_writer`, with their shared row and stats helpers in
:mod:`~pyhudi.write.rows` and the Spark task identity in :mod:`~pyhudi.write.task`), markers,
schema evolution on write, replace operations, and the commit metadata made from the handles'
stats (:mod:`~pyhudi.write.result`). Completing an instant is not done here but in
:mod:`pyhudi.commit`. It stands below ``plans``, ``transaction``, ``actions``, ``commit``,
``services`` and ``spark`` and imports none of them, nor pyspark: the Spark layer drives these
functions inside ``mapInArrow`` and hands in what only Spark knows.
"""
