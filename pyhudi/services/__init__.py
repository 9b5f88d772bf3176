"""Table service policies: what to plan and when, for cleaning, compaction and clustering
(:mod:`~pyhudi.services.clean`, :mod:`~pyhudi.services.compaction`,
:mod:`~pyhudi.services.clustering`), and the services that run entirely on the timeline and files:
archival, savepoint creation and deletion, rollback of the latest commit and restore. The plan
records and their readers are :mod:`pyhudi.plans`; executing a plan is :mod:`pyhudi.actions`;
completing an instant is :mod:`pyhudi.commit`. Services stand above all of those and below
``spark``: the Spark jobs that run a compaction or clustering plan (``pyhudi.spark.*_job``) call
into here, never the other way round, and nothing here imports pyspark.
"""
