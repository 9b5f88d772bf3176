"""Table services: rollback (cleaning, archival and compaction come with later issues)."""
