"""A small, picklable layer over :mod:`pyarrow.fs`.

Tables address files by paths relative to the table's base path; this class turns them into file
system paths. It is picklable (executors get a copy) and it offers the two primitives Hudi's
atomicity rests on: create-if-absent for timeline files and write-to-temp-then-rename, so a reader
never sees a half-written instant file.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs

from pyhudi.errors import HudiFileExistsError


@dataclass(frozen=True)
class FileInfo:
    """A file found by a listing: name relative to the listed folder, size and mtime (ns)."""

    name: str
    size: int
    mtime_ns: int


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" not in uri:
        path = os.path.abspath(uri)
        return pafs.LocalFileSystem(), path
    if uri.startswith("file://"):
        return pafs.LocalFileSystem(), uri[len("file://"):]
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path


class Storage:
    """Files of one table, addressed relative to its base path."""

    def __init__(self, base_uri: str) -> None:
        self.base_uri = base_uri
        self.fs, self.base_path = _resolve(base_uri)
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)

    def __reduce__(self) -> tuple[type[Storage], tuple[str]]:
        return (Storage, (self.base_uri,))

    # -- paths ------------------------------------------------------------------------------
    def full(self, rel: str) -> str:
        return posixpath.join(self.base_path, rel) if rel else self.base_path

    def uri(self, rel: str = "") -> str:
        """A URI other engines (Spark, hudi-rs) understand for a relative path."""
        path = self.full(rel)
        if self.is_local:
            return "file://" + path
        scheme = self.base_uri.split("://", 1)[0]
        return f"{scheme}://{path}"

    # -- reading ----------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full(rel)).type != pafs.FileType.NotFound

    def is_dir(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full(rel)).type == pafs.FileType.Directory

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.full(rel)) as f:
            return bytes(f.read())

    def size(self, rel: str) -> int:
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(self.full(rel))
        return int(info.size or 0)

    def mtime_ns(self, rel: str) -> int | None:
        """Modification time of a file in ns since the epoch; None if it does not exist."""
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound:
            return None
        return int(info.mtime_ns or 0)

    def list_files(self, rel: str) -> list[FileInfo]:
        """Regular files directly inside a folder (empty list if the folder is absent)."""
        selector = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=False)
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                out.append(FileInfo(info.base_name, int(info.size or 0), int(info.mtime_ns or 0)))
        return out

    def list_dirs(self, rel: str) -> list[str]:
        selector = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=False)
        return [i.base_name for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.Directory]

    def walk_files(self, rel: str) -> list[tuple[str, FileInfo]]:
        """Every file below a folder as (path relative to the base path, info)."""
        selector = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=True)
        prefix = self.base_path.rstrip("/") + "/"
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                relpath = info.path[len(prefix):] if info.path.startswith(prefix) else info.path
                out.append((relpath, FileInfo(info.base_name, int(info.size or 0), int(info.mtime_ns or 0))))
        return out

    # -- writing ----------------------------------------------------------------------------
    def mkdirs(self, rel: str) -> None:
        self.fs.create_dir(self.full(rel), recursive=True)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write a file in one go; visible under its name only once complete (local: rename)."""
        target = self.full(rel)
        parent = posixpath.dirname(target)
        self.fs.create_dir(parent, recursive=True)
        if not self.is_local:
            with self.fs.open_output_stream(target) as f:
                f.write(data)
            return
        tmp = posixpath.join(parent, f".{posixpath.basename(target)}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def create_new(self, rel: str, data: bytes) -> None:
        """Create a file that must not exist yet (timeline instants): fail if it does."""
        target = self.full(rel)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        if self.is_local:
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                raise HudiFileExistsError(f"{rel} already exists; another writer may be using this name") from None
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return
        if self.exists(rel):
            raise HudiFileExistsError(f"{rel} already exists; another writer may be using this name")
        self.write_bytes(rel, data)

    def delete(self, rel: str) -> bool:
        """Delete a file; False if it was already gone."""
        try:
            self.fs.delete_file(self.full(rel))
            return True
        except FileNotFoundError:
            return False
        except OSError:
            if not self.exists(rel):
                return False
            raise

    def delete_dir(self, rel: str) -> None:
        if self.is_dir(rel):
            self.fs.delete_dir(self.full(rel))

    def open_output(self, rel: str) -> pafs.NativeFile:
        target = self.full(rel)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        return self.fs.open_output_stream(target)

    @property
    def can_append(self) -> bool:
        """Whether files can be appended to in place (object stores cannot: writers roll over)."""
        return self.is_local

    def open_append(self, rel: str) -> pafs.NativeFile:
        """An output stream positioned at the end of an existing file (log files only)."""
        return self.fs.open_append_stream(self.full(rel))
