"""The exceptions pyhudi raises.

Every error is a :class:`HudiError`, so ``except pyhudi.HudiError`` catches all of them; the
subclasses let callers react to one kind of problem (bad options, bad input data, a table that is
not what the options say) without parsing messages. Messages name the problem and what to do.
"""

from __future__ import annotations


class HudiError(Exception):
    """Base class of every error raised by pyhudi."""


class HudiConfigError(HudiError, ValueError):
    """An option has a value pyhudi cannot accept (unknown enum value, unparsable number...)."""


class HudiUnsupportedError(HudiError, NotImplementedError):
    """A valid Hudi feature or option value that pyhudi does not implement yet."""


class HudiUnsupportedOptionError(HudiUnsupportedError, HudiConfigError):
    """An Apache Hudi option, or a value of one, that pyhudi does not implement: it is refused
    before anything is written rather than ignored, so no table lacks what its options asked for.
    Both ``except HudiUnsupportedError`` and ``except HudiConfigError`` catch it."""


class HudiTableNotFoundError(HudiError, FileNotFoundError):
    """The path holds no Hudi table: no ``.hoodie/hoodie.properties``, no backup of it, no timeline."""


class HudiTableMismatchError(HudiError):
    """The write options contradict the table's own configuration (type, keys, partitioning)."""


class HudiSchemaError(HudiError):
    """The incoming schema cannot be written to the table (missing fields, incompatible types)."""


class HudiKeyError(HudiError):
    """A record key, partition path or ordering value is missing or null in the incoming rows."""


class HudiPartitionPathError(HudiKeyError):
    """Incoming values make partition paths that cannot be folders of the table (``a/``, ``..``,
    ``.hoodie``, a partition inside another); raised before the write requests its instant."""


class HudiCorruptFileError(HudiError):
    """A table file (timeline instant, properties, base file) cannot be parsed."""


class HudiTablePropertiesError(HudiCorruptFileError):
    """A table has a timeline but no readable ``.hoodie/hoodie.properties`` (missing, empty,
    truncated, checksum mismatch) and no valid ``hoodie.properties.backup`` to fall back on.

    Nothing reads or writes such a table: its type, keys and partitioning are unknown, and guessing
    them from write options would corrupt it."""


class HudiCommitError(HudiError):
    """A write failed; it was rolled back and the table is unchanged."""


class HudiInstantNotFoundError(HudiError, LookupError):
    """An instant named by the caller is not on the table's timeline."""


class HudiCompactionError(HudiError):
    """A compaction cannot be scheduled or run (writes pending, no such plan)."""


class HudiRetentionError(HudiError):
    """A query reaches an instant whose files were cleaned or whose metadata was archived."""


class HudiRestoreError(HudiError):
    """A rollback or restore was refused (not the latest commit, savepointed, compaction planned on top)."""


class HudiWriteConflictError(HudiCommitError):
    """Optimistic concurrency control: another writer changed a file group this write changed too,
    after this write started; this write was rolled back and the other's stands."""


class HudiConcurrentWriteError(HudiError):
    """A write was refused because another write is in progress and the table is in single-writer mode."""


class HudiLockError(HudiError):
    """The table's lock could not be taken within the configured waits and retries."""


class HudiFileExistsError(HudiError, FileExistsError):
    """A file that must be new (a timeline instant, a new log file) exists already."""


class HudiClusteringError(HudiError):
    """A clustering could not be scheduled or run."""


class HudiClusteringUpdateError(HudiWriteConflictError):
    """A write updated file groups that a pending clustering rewrites (Hudi's reject update strategy)."""
