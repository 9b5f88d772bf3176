"""Plan records and their readers: compaction, clustering, clean and savepoint plans as Hudi
writes them on the timeline, and what pending plans hold.

Deciding what and when to plan is policy (:mod:`pyhudi.services`); executing a plan is an action
(:mod:`pyhudi.actions`). This package reads and encodes only, below both.
"""
