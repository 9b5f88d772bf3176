"""File system access for tables: pyarrow.fs underneath; atomic creation, store settings and
object-store economy on top."""

from pyhudi.storage.fs import FileInfo, Storage
from pyhudi.storage.options import StorageOptions, is_storage_key, resolve_options

__all__ = ["FileInfo", "Storage", "StorageOptions", "is_storage_key", "resolve_options"]
