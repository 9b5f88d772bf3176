"""The commit point: the only code that completes a data-table instant and writes the metadata table.

* :mod:`~pyhudi.commit.point`: :class:`~pyhudi.commit.point.CommitPoint`, built once from the
  options; its ``finish`` (lock, reload, still-pending and caller's checks, metadata-table delta
  commit, completion, markers, post-commit hooks) ends writes, compactions and clusterings, its
  ``complete`` is the step cleans, rollbacks, restores and savepoints are handed.
* :mod:`~pyhudi.commit.transaction`: a write's instant from request to completion or rollback.
* :mod:`~pyhudi.commit.metadata_sync`: what a data-table action becomes in the metadata table,
  the writer's metadata options, the metadata table's creation and rebuilding.
* :mod:`~pyhudi.commit.metadata_writer`, :mod:`~pyhudi.commit.record_index_build`: writing the
  metadata table (delta commits, its own compaction, clean and archival with the actions below
  and its own plain completion; the record index built in this process).
"""
