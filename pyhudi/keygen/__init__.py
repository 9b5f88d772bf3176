"""Key generators: which fields make the record key and the partition path, and how.

This module holds the engine-independent part (the spec, the string rules, and which partition
paths can be folders of a table: :mod:`pyhudi.keygen.paths`); the Spark expressions that apply it
to a DataFrame are in :mod:`pyhudi.spark.keygen`.
"""

from pyhudi.keygen.spec import (
    DEFAULT_PARTITION,
    KeyGenSpec,
    escape_partition_value,
    resolve_keygen,
)

__all__ = ["DEFAULT_PARTITION", "KeyGenSpec", "escape_partition_value", "resolve_keygen"]
