"""A small, picklable layer over :mod:`pyarrow.fs`, with what object stores need on top.

Tables address files by paths relative to the table's base path; :class:`Storage` turns them into
file system paths and keeps the user's URI (``s3a://bucket/t``) for the engines that get paths
from it (Spark, hudi-rs). It is picklable with its :class:`StorageOptions`, so executors, the
metadata table, locks and services reach the store exactly as the driver does.

Hudi's atomicity rests on two primitives here: create-if-absent (timeline instants, log files,
archive files, lock files: ``O_EXCL`` locally, ``If-None-Match: *`` on S3) and a write that is
visible only once complete (temp file and rename locally; an object PUT is atomic by itself).
Object stores get no directory markers and one PUT per small file. On S3 every probe, read and
delete is one request (:mod:`pyhudi.storage.s3`): no HEAD before a GET, no listing after a missed
HEAD, no folder marker put back after a delete.
"""

from __future__ import annotations

import os
import posixpath
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from pyhudi.errors import HudiConfigError, HudiFileExistsError, HudiUnsupportedError
from pyhudi.storage import memo, s3
from pyhudi.storage.options import (
    AZURE_SCHEMES,
    GCS_SCHEMES,
    HDFS_SCHEMES,
    S3_SCHEMES,
    StorageOptions,
    check_scheme,
    split_uri,
)
from pyhudi.storage.s3_files import economical


@dataclass(frozen=True)
class FileInfo:
    """A file found by a listing: name relative to the listed folder, size and mtime (ns)."""

    name: str
    size: int
    mtime_ns: int


def _s3_fs(options: StorageOptions) -> pafs.FileSystem:
    kwargs: dict[str, Any] = {
        "region": options.region or "us-east-1",
        # throttling (503 SlowDown), 5xx and timeouts: retried with exponential backoff, as boto3 does
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=options.max_attempts),
        "connect_timeout": options.connect_timeout_s, "request_timeout": options.read_timeout_s,
        "check_directory_existence_before_creation": False,
        "allow_bucket_creation": False, "allow_bucket_deletion": False,
    }
    if options.endpoint:
        kwargs["endpoint_override"] = options.endpoint_url
    if options.anonymous:
        kwargs["anonymous"] = True
    elif options.access_key:
        kwargs.update(access_key=options.access_key, secret_key=options.secret_key,
                      session_token=options.session_token)
    if options.path_style is False:
        kwargs["force_virtual_addressing"] = True
    return economical(options, pafs.S3FileSystem(**kwargs))


def _resolve(uri: str, options: StorageOptions) -> tuple[pafs.FileSystem, str]:
    scheme, authority, path = split_uri(uri)
    if scheme == "":
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    if scheme == "file":
        return pafs.LocalFileSystem(), path
    path = path.rstrip("/")
    if scheme in S3_SCHEMES:
        return _s3_fs(options), authority + path
    try:
        if scheme in GCS_SCHEMES:
            return pafs.GcsFileSystem(), authority + path
        if scheme in AZURE_SCHEMES:
            container, _, host = authority.partition("@")
            account = host.split(".", 1)[0]
            if not container or not account:
                raise HudiConfigError(f"{uri}: an {scheme}:// path is {scheme}://<container>@<account>"
                                      ".dfs.core.windows.net/<path>")
            return pafs.AzureFileSystem(account_name=account), container + path
        if scheme in HDFS_SCHEMES:
            host, _, port = authority.partition(":")
            return pafs.HadoopFileSystem(host, int(port or 8020)), path
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        if isinstance(exc, HudiConfigError):
            raise
        raise HudiUnsupportedError(f"{uri}: this pyarrow cannot open {scheme}:// ({exc})") from None
    raise AssertionError(scheme)  # check_scheme refused every other scheme


class Storage:
    """Files of one table, addressed relative to its base path."""

    def __init__(self, base_uri: str, options: StorageOptions | None = None) -> None:
        self.scheme = check_scheme(base_uri)
        self.base_uri = base_uri.rstrip("/") if self.scheme not in ("", "file") else base_uri
        self.options = options or StorageOptions()
        self.fs, self.base_path = _resolve(self.base_uri, self.options)
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)
        self.is_s3 = self.scheme in S3_SCHEMES

    def __reduce__(self) -> tuple[type[Storage], tuple[str, StorageOptions]]:
        return (Storage, (self.base_uri, self.options))

    def __repr__(self) -> str:
        return f"Storage({self.base_uri!r})"

    def child(self, rel: str) -> Storage:
        """The storage of a folder below this one (the metadata table), with the same options."""
        return Storage(self.uri(rel), self.options)

    @property
    def exclusive_create(self) -> bool:
        """Whether files can be created only-if-absent, which more than one writer needs."""
        return self.is_local or (self.is_s3 and self.options.conditional_create)

    # -- paths ------------------------------------------------------------------------------
    def full(self, rel: str) -> str:
        return posixpath.join(self.base_path, rel) if rel else self.base_path

    def _key(self, rel: str) -> str:
        """The full path of ``rel`` as read memos name it (:mod:`memo`)."""
        return posixpath.normpath(self.full(rel))

    def uri(self, rel: str = "") -> str:
        """A URI other engines (Spark, hudi-rs) understand for a relative path, in the user's scheme."""
        if self.is_local:
            return "file://" + self.full(rel)
        return f"{self.base_uri}/{rel}" if rel else self.base_uri

    def _bucket_key(self, rel: str) -> tuple[str, str]:
        bucket, _, key = self.full(rel).partition("/")
        return bucket, key

    def _folder_key(self, rel: str) -> tuple[str, str]:
        """Bucket and key prefix of the objects inside a folder (``key/``; ``""`` for the bucket)."""
        bucket, key = self._bucket_key(rel)
        return bucket, key.rstrip("/") + "/" if key.strip("/") else ""

    # -- reading ----------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """Whether a file exists (folders: :meth:`is_dir`); one HEAD on S3. A file of a metadata
        folder is looked up in its listing instead while the table lock is held (:mod:`memo`): the
        listing costs one request too, and the holder lists that folder anyway."""
        target = self._key(rel)
        held = memo.lookup(self, posixpath.dirname(target))
        if held is not None:
            return posixpath.basename(target) in {f.name for f in self._listed(held, posixpath.dirname(target))}
        if self.is_s3:
            return s3.head(self.options, *self._bucket_key(rel)) is not None
        return self.fs.get_file_info(self.full(rel)).type != pafs.FileType.NotFound

    def is_dir(self, rel: str) -> bool:
        """Whether a folder exists; on object stores, whether any file lies below it (one LIST on S3)."""
        if self.is_s3:
            return s3.has_prefix(self.options, *self._folder_key(rel))
        return self.fs.get_file_info(self.full(rel)).type == pafs.FileType.Directory

    def read_bytes(self, rel: str) -> bytes:
        """A whole file; :class:`FileNotFoundError` if absent (one GET on S3, no HEAD first)."""
        data = self.read_bytes_or_none(rel)
        if data is None:
            raise FileNotFoundError(self.full(rel))
        return data

    def read_bytes_or_none(self, rel: str) -> bytes | None:
        """A whole file, None if absent: for files that may be missing, without asking first (nor
        again: a file of a metadata folder read once in a lock hold, or missing from the folder's
        listing in it, is not read again in that hold)."""
        target = self._key(rel)
        folder = posixpath.dirname(target)
        held = memo.lookup(self, folder)
        if held is None:
            return self._read_or_none(rel)
        with held.guard:
            if target in held.contents:
                return held.contents[target]
            listed = held.listings.get(folder)
        data = None if listed is not None and posixpath.basename(target) not in {f.name for f in listed} \
            else self._read_or_none(rel)
        with held.guard:
            held.contents[target] = data
        return data

    def _read_or_none(self, rel: str) -> bytes | None:
        if self.is_s3:
            state = s3.get(self.options, *self._bucket_key(rel))
            return None if state is None else state.body
        try:
            with self.fs.open_input_stream(self.full(rel)) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    def size(self, rel: str) -> int:
        if self.is_s3:
            found = s3.head(self.options, *self._bucket_key(rel))
            if found is None:
                raise FileNotFoundError(self.full(rel))
            return int(found.get("ContentLength") or 0)
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(self.full(rel))
        return int(info.size or 0)

    def mtime_ns(self, rel: str) -> int | None:
        """Modification time of a file in ns since the epoch; None if it does not exist."""
        if self.is_s3:
            found = s3.head(self.options, *self._bucket_key(rel))
            if found is None:
                return None
            modified = found.get("LastModified")
            return round(modified.timestamp() * 1e6) * 1000 if modified is not None else 0  # exact to the µs
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound:
            return None
        return int(info.mtime_ns or 0)

    def now_ms(self) -> int:
        """The store's clock in ms since the epoch: ages of heartbeats and leases are measured
        against the same clock that stamped the files' modification times."""
        if self.is_s3:
            return s3.store_time_ms(self.options, self._bucket_key("")[0])
        return int(time.time() * 1000)

    def list_files(self, rel: str) -> list[FileInfo]:
        """Regular files directly inside a folder (empty list if the folder is absent); a metadata
        folder is listed once per lock hold until a write changes it (:mod:`memo`)."""
        held = memo.lookup(self, self._key(rel))
        if held is not None:
            return list(self._listed(held, self._key(rel)))
        return self._list_files(self.full(rel))

    def _listed(self, held: memo.ReadMemo, folder: str) -> list[FileInfo]:
        with held.guard:
            found = held.listings.get(folder)
        if found is None:
            found = self._list_files(folder)
            with held.guard:
                held.listings[folder] = found
        return found

    def _list_files(self, folder: str) -> list[FileInfo]:
        selector = pafs.FileSelector(folder, allow_not_found=True, recursive=False)
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                out.append(FileInfo(info.base_name, int(info.size or 0), int(info.mtime_ns or 0)))
        return out

    def list_dirs(self, rel: str) -> list[str]:
        """Folders directly inside a folder (remembered in a lock hold as :meth:`list_files`)."""
        target = self._key(rel)
        held = memo.lookup(self, target)
        if held is not None:
            with held.guard:
                found = held.dirs.get(target)
            if found is None:
                found = self._list_dirs(target)
                with held.guard:
                    held.dirs[target] = found
            return list(found)
        return self._list_dirs(target)

    def _list_dirs(self, target: str) -> list[str]:
        selector = pafs.FileSelector(target, allow_not_found=True, recursive=False)
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
        """Create a folder (and its parents); object stores have no folders, so nothing there."""
        if not self._object_store:
            self.fs.create_dir(self.full(rel), recursive=True)

    @property
    def _object_store(self) -> bool:
        return self.scheme in (*S3_SCHEMES, *GCS_SCHEMES)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write a file in one go; visible under its name only once complete (local: rename)."""
        target = self.full(rel)
        memo.forget(self, self._key(rel))
        if self.is_s3:
            s3.put(self.options, *self._bucket_key(rel), data)
            return
        parent = posixpath.dirname(target)
        if not self.is_local:
            self.mkdirs(posixpath.dirname(rel))
            with self.fs.open_output_stream(target) as out:
                out.write(data)
            return
        self.fs.create_dir(parent, recursive=True)
        tmp = posixpath.join(parent, f".{posixpath.basename(target)}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def touch(self, rel: str) -> None:
        """Create an empty file or refresh its modification time (a heartbeat). An empty file has no
        half-written state, so on local disk it is touched in place: a writer killed mid-beat leaves
        no temporary file behind, as :meth:`write_bytes`'s rename could."""
        if not self.is_local:
            self.write_bytes(rel, b"")
            return
        memo.forget(self, self._key(rel))
        target = self.full(rel)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        with open(target, "ab"):
            os.utime(target)

    def create_new(self, rel: str, data: bytes) -> None:
        """Create a file that must not exist yet (timeline instants, log files under concurrency,
        archive and lock files): :class:`HudiFileExistsError` if it does, even when another writer
        creates it at the same moment."""
        target = self.full(rel)
        memo.forget(self, self._key(rel))
        if self.is_s3:
            if not self.options.conditional_create:
                raise HudiUnsupportedError(
                    f"cannot create {self.uri(rel)} exclusively: fs.s3a.create.conditional.enabled=false says "
                    "this store does not honour If-None-Match")
            s3.create_new(self.options, *self._bucket_key(rel), data, self.uri(rel))
            return
        if not self.is_local:
            # gs://, abfs://, hdfs://: pyarrow offers no exclusive create; a second writer is
            # refused where writers are configured (see exclusive_create)
            if self.exists(rel):
                raise HudiFileExistsError(f"{rel} already exists; another writer may be using this name")
            self.write_bytes(rel, data)
            return
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise HudiFileExistsError(f"{rel} already exists; another writer may be using this name") from None
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    def delete(self, rel: str) -> bool:
        """Delete a file; False if it was already gone (on S3 a HEAD tells: :meth:`discard` spares
        it where nobody asks)."""
        memo.forget(self, self._key(rel))
        if self.is_s3:
            if not self.exists(rel):
                return False
            s3.delete(self.options, *self._bucket_key(rel))
            return True
        try:
            self.fs.delete_file(self.full(rel))
            return True
        except FileNotFoundError:
            return False
        except OSError:
            if not self.exists(rel):
                return False
            raise

    def discard(self, rel: str) -> None:
        """Delete a file if it exists: one DELETE on S3 (which answers alike whether it did)."""
        memo.forget(self, self._key(rel))
        if self.is_s3:
            s3.delete(self.options, *self._bucket_key(rel))
            return
        self.delete(rel)

    def delete_dir(self, rel: str, *, files: Iterable[str] | None = None) -> None:
        """Delete a folder and everything in it (absent is fine). On S3 a listing and one
        multi-object delete per 1000 files, no probe first and no marker of the parent left;
        ``files``: every file in the folder (relative to the base path) as the caller listed it
        just before, deleted by name on S3 without listing it again."""
        memo.forget(self, self._key(rel), tree=True)
        if self.is_s3:
            if files is None:
                s3.delete_prefix(self.options, *self._folder_key(rel))
            else:
                bucket, prefix = self._folder_key(rel)
                s3.delete_keys(self.options, bucket, [self._bucket_key(f)[1] for f in files], shown=prefix)
            return
        if self.is_dir(rel):
            self.fs.delete_dir(self.full(rel))

    def open_output(self, rel: str) -> Any:
        """An output stream for a new file (base files). On S3 it is buffered and written by one
        PUT on close; ``abort()`` (where offered) drops it unwritten."""
        memo.forget(self, self._key(rel))
        if self.is_s3:
            return s3.Upload(self.options, *self._bucket_key(rel))
        target = self.full(rel)
        self.mkdirs(posixpath.dirname(rel))
        return self.fs.open_output_stream(target)

    @property
    def can_append(self) -> bool:
        """Whether files can be appended to in place (object stores cannot: writers roll over)."""
        return self.is_local

    def open_append(self, rel: str) -> pafs.NativeFile:
        """An output stream positioned at the end of an existing file (log files only)."""
        memo.forget(self, self._key(rel))
        return self.fs.open_append_stream(self.full(rel))
