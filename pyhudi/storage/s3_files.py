"""pyarrow's S3 file system with reads, probes and deletes of one request each.

Every ``open_input_file`` of pyarrow's S3 file system first sends a HEAD for the object's size,
then a GET for the parquet footer, then GETs for the columns; its deletes put a folder marker back
for the parent. Base files are read that way wherever pyhudi merges, looks up keys, compacts or
clusters, so :class:`EconomicalS3` wraps the native file system (``pafs.PyFileSystem``) and
changes only that:

* ``open_input_file`` returns a :class:`RangedFile`: its first read asks for the object's last
  :data:`TAIL_BYTES` with a suffix range, whose answer carries the size (an object that small
  comes whole), so a footer costs one GET and a whole file two (one if small);
* ``open_input_stream`` is one streamed GET;
* ``delete_file`` / ``delete_dir`` go through :mod:`pyhudi.storage.s3` (no marker put back).

Listings, probes by path and everything else are the native file system's.
"""

from __future__ import annotations

import io
import threading
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from pyhudi.storage import s3
from pyhudi.storage.options import StorageOptions

#: bytes the first read of an object asks for from its end: a parquet footer with Hudi's bloom
#: filter in it (some 400 KB for 30,000 keys; pyarrow's own first read of 64 KiB would need a
#: second GET for the rest), or a whole small file
TAIL_BYTES = 1024 * 1024


class RangedFile(io.RawIOBase):
    """Random access to one object by ranged GETs, without a HEAD: the first read (or the size)
    fetches the last :data:`TAIL_BYTES`, which answer with the size; later reads inside those bytes
    cost nothing, others one GET each (pyarrow coalesces a row group's column chunks into one)."""

    def __init__(self, options: StorageOptions, bucket: str, key: str) -> None:
        super().__init__()
        self._target = (options, bucket, key)
        self._pos = 0
        self._size: int | None = None
        self._tail = b""
        self._guard = threading.Lock()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _get(self, byte_range: str) -> tuple[bytes, str | None]:
        return s3.get_range(*self._target, byte_range)

    def _load_tail(self) -> int:
        if self._size is None:
            body, content_range = self._get(f"bytes=-{TAIL_BYTES}")
            # "bytes 10-19/20"; none when the store sent the whole (small, or empty) object
            self._size = int(content_range.rpartition("/")[2]) if content_range else len(body)
            self._tail = body
        return self._size

    def size(self) -> int:
        with self._guard:
            return self._load_tail()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        with self._guard:
            if whence == io.SEEK_SET:
                self._pos = offset
            elif whence == io.SEEK_CUR:
                self._pos += offset
            else:
                self._pos = self._load_tail() + offset
            return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        with self._guard:
            total = self._load_tail()
            start = min(self._pos, total)
            end = total if size is None or size < 0 else min(total, start + size)
            self._pos = end
            if start >= end:
                return b""
            tail_start = total - len(self._tail)
            if start >= tail_start:
                return self._tail[start - tail_start:end - tail_start]
            if end <= tail_start:
                return self._get(f"bytes={start}-{end - 1}")[0]
            head = self._get(f"bytes={start}-{tail_start - 1}")[0]
            return head + self._tail[:end - tail_start]

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class EconomicalS3(pafs.FileSystemHandler):
    """The handler of :func:`economical`: the native file system but for reads and deletes."""

    def __init__(self, options: StorageOptions, native: pafs.FileSystem) -> None:
        self.options = options
        self.native = native

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        bucket, _, key = path.lstrip("/").partition("/")
        return bucket, key

    # -- what this handler does itself ---------------------------------------------------------
    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(RangedFile(self.options, *self._split(path)), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(s3.open_stream(self.options, *self._split(path)), mode="r")

    def delete_file(self, path: str) -> None:
        bucket, key = self._split(path)
        if s3.head(self.options, bucket, key) is None:
            raise FileNotFoundError(path)
        s3.delete(self.options, bucket, key)

    def delete_dir(self, path: str) -> None:
        bucket, key = self._split(path)
        s3.delete_prefix(self.options, bucket, key.rstrip("/") + "/" if key.strip("/") else "")

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.delete_dir(path)

    def delete_root_dir_contents(self) -> None:
        raise OSError("pyhudi never empties a whole bucket")

    # -- the native file system's ----------------------------------------------------------------
    def get_type_name(self) -> str:
        return "pyhudi-s3"

    def equals(self, other: Any) -> bool:
        return isinstance(other, EconomicalS3) and other.options == self.options

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return list(self.native.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self.native.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self.native.create_dir(path, recursive=recursive)

    def move(self, src: str, dest: str) -> None:
        self.native.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.native.copy_file(src, dest)

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.native.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.native.open_append_stream(path, metadata=metadata)

    def normalize_path(self, path: str) -> str:
        return str(self.native.normalize_path(path))


def economical(options: StorageOptions, native: pafs.FileSystem) -> pafs.FileSystem:
    """``native`` (pyarrow's S3 file system for ``options``) with one-request reads and deletes."""
    return pafs.PyFileSystem(EconomicalS3(options, native))
