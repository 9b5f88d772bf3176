"""Key generators: which fields make the record key and the partition path, and how.

This module holds the engine-independent part (the spec and the string rules); the Spark
expressions that apply it to a DataFrame are in :mod:`pyhudi.spark.keygen`.
"""

from pyhudi.keygen.spec import (
    DEFAULT_PARTITION,
    KeyGenSpec,
    escape_partition_value,
    resolve_keygen,
)

__all__ = ["DEFAULT_PARTITION", "KeyGenSpec", "escape_partition_value", "resolve_keygen"]
