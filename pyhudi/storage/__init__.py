"""File system access for tables: pyarrow.fs underneath, atomic creation and listing on top."""

from pyhudi.storage.fs import FileInfo, Storage

__all__ = ["FileInfo", "Storage"]
