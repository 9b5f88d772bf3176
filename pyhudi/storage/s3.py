"""What pyarrow's S3 file system does not offer, through boto3: exclusive creation, single PUTs,
conditional replacement, the store's clock, and requests pyarrow makes two or three of.

pyarrow writes every object as a three-request multipart upload and has no conditional PUT.
Timeline instants must be created exactly once (``If-None-Match: *``), the storage lock replaces
its file only if unchanged (``If-Match: <etag>``), and most files pyhudi writes are small, so those
go through boto3 here: one PUT each. pyarrow also sends a HEAD before every read (for the size)
and re-creates a folder marker after every delete; whole-object reads (:func:`get`), probes
(:func:`head`), deletes (:func:`delete`, :func:`delete_prefix`) and ranged reads of files whose
size the listing knew (:class:`RangedFile`) are one request each here. Listings stay on pyarrow.

Retries: botocore's standard mode (exponential backoff with jitter) retries throttling (503
SlowDown), 5xx answers, timeouts and dropped connections, up to ``max_attempts`` attempts. Every
request here is safe to repeat: GET, HEAD, DELETE and unconditional PUTs are idempotent, and a
conditional PUT is checked by the store again on each attempt, so a retry can never create or
replace what it must not. It can only make a create that did succeed on an attempt whose answer was
lost look refused (412); :func:`create_new` says so when that may be the case.
"""

from __future__ import annotations

import email.utils
import io
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyhudi.errors import HudiError, HudiFileExistsError
from pyhudi.storage.options import StorageOptions

#: objects up to this size are written with one PUT; larger ones as a multipart upload
SINGLE_PUT_LIMIT = 64 * 1024 * 1024

_CLIENTS: dict[StorageOptions, Any] = {}
_CLIENTS_GUARD = threading.Lock()


class PreconditionFailed(HudiError):
    """A conditional write found the object changed (412) or raced another one (409).

    ``retried``: how many times the PUT was repeated after an error or a lost answer; when > 0 an
    earlier attempt of this very write may be what the store found."""

    def __init__(self, message: str, *, retried: int = 0) -> None:
        super().__init__(message)
        self.retried = retried


@dataclass(frozen=True)
class ObjectState:
    """An object's entity tag and the store's time when it was read (ms since the epoch)."""

    etag: str
    body: bytes
    store_time_ms: int


def client(options: StorageOptions) -> Any:
    """A boto3 S3 client for these options, one per process (boto3 clients are thread-safe)."""
    with _CLIENTS_GUARD:
        found = _CLIENTS.get(options)
        if found is not None:
            return found
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError:  # pragma: no cover - boto3 is a dependency
        raise HudiError("tables on S3 need boto3 (pip install boto3)") from None
    config = Config(
        retries={"mode": "standard", "max_attempts": options.max_attempts},
        s3={"addressing_style": "path" if options.path_style or options.path_style is None and options.endpoint
            else "auto"},
        signature_version=UNSIGNED if options.anonymous else None,
        connect_timeout=options.connect_timeout_s, read_timeout=options.read_timeout_s,
    )
    made = boto3.session.Session().client(
        "s3", endpoint_url=options.endpoint_url, region_name=options.region or "us-east-1",
        aws_access_key_id=options.access_key, aws_secret_access_key=options.secret_key,
        aws_session_token=options.session_token, config=config)
    with _CLIENTS_GUARD:
        return _CLIENTS.setdefault(options, made)


def _code(exc: Exception) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    return (str(response.get("Error", {}).get("Code", "")),
            int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)))


def _is_client_error(exc: Exception) -> bool:
    return type(exc).__name__ == "ClientError" or hasattr(exc, "response")


def _not_found(exc: Exception) -> bool:
    if not _is_client_error(exc):
        return False
    code, status = _code(exc)
    return status == 404 or code in ("NoSuchKey", "404", "NotFound")


def _retried(exc: Exception) -> int:
    """How many times botocore repeated the request that ended in ``exc``."""
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


def _store_time_ms(response: dict[str, Any]) -> int:
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        return int(time.time() * 1000)
    return int(email.utils.parsedate_to_datetime(date).timestamp() * 1000)


def _is_sdk_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".", 1)[0] in ("botocore", "boto3", "s3transfer", "urllib3")


@contextmanager
def _as_os_errors(bucket: str, key: str) -> Iterator[None]:
    """boto3's errors as pyarrow raises them for the same failures: :class:`OSError` (a
    :class:`PermissionError` for 403), so that callers handle one kind whichever client failed."""
    try:
        yield
    except Exception as exc:
        if not _is_sdk_error(exc):
            raise
        code, status = _code(exc)
        kind = PermissionError if status == 403 else OSError
        raise kind(f"s3://{bucket}/{key}: {code or status or type(exc).__name__} ({exc})") from exc


#: errors while a response body streams in: the request is retried (botocore retries only the
#: request itself, not a body that breaks off; a GET is safe to repeat)
_STREAM_ERRORS = ("ResponseStreamingError", "ReadTimeoutError", "ConnectionClosedError", "IncompleteReadError",
                  "ProtocolError", "IncompleteRead")


def _read_body(options: StorageOptions, request: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bytes]:
    """A GET's response and its whole body, the GET sent again (with backoff) when the body breaks
    off midway."""
    attempts = max(1, options.max_attempts)
    for attempt in range(attempts):
        response = request()
        try:
            return response, response["Body"].read()
        except Exception as exc:
            if attempt + 1 >= attempts or type(exc).__name__ not in _STREAM_ERRORS:
                raise
            time.sleep(random.random() * min(5.0, 0.1 * 2 ** attempt))
    raise AssertionError("unreachable")


def put(options: StorageOptions, bucket: str, key: str, data: bytes, *, if_none_match: bool = False,
        if_match: str | None = None) -> str:
    """Write an object with one PUT; its new entity tag.

    ``if_none_match`` creates it only if absent, ``if_match`` replaces it only if its entity tag is
    still that one: either way :class:`PreconditionFailed` when the store refuses (412), or when
    another conditional write to the same key was in flight (409), which S3 also reports."""
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": data}
    if if_none_match:
        kwargs["IfNoneMatch"] = "*"
    if if_match is not None:
        kwargs["IfMatch"] = if_match
    with _as_os_errors(bucket, key):
        try:
            return str(client(options).put_object(**kwargs).get("ETag", ""))
        except Exception as exc:
            if _is_client_error(exc):
                code, status = _code(exc)
                if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise PreconditionFailed(f"s3://{bucket}/{key}: {code or status}",
                                             retried=_retried(exc)) from None
            raise


def create_new(options: StorageOptions, bucket: str, key: str, data: bytes, shown: str) -> None:
    """Create an object that must not exist: :class:`HudiFileExistsError` if it does."""
    try:
        put(options, bucket, key, data, if_none_match=True)
    except PreconditionFailed as exc:
        raise HudiFileExistsError(f"{shown} already exists; another writer may be using this name" + (
            f", or this write made it on an attempt whose answer was lost (the PUT was sent again after "
            f"{exc.retried} retried attempt(s)); run the operation again" if exc.retried else "")) from None


def get(options: StorageOptions, bucket: str, key: str) -> ObjectState | None:
    """An object's bytes and entity tag, None if absent (one GET, no HEAD first)."""
    with _as_os_errors(bucket, key):
        try:
            response, body = _read_body(options, lambda: client(options).get_object(Bucket=bucket, Key=key))
        except Exception as exc:
            if _not_found(exc):
                return None
            raise
    return ObjectState(str(response.get("ETag", "")), body, _store_time_ms(response))


def head(options: StorageOptions, bucket: str, key: str) -> dict[str, Any] | None:
    """An object's metadata (``ContentLength``, ``LastModified``, ``ETag``), None if absent: one
    HEAD, where pyarrow follows a miss with a listing (it looks for a folder of that name)."""
    with _as_os_errors(bucket, key):
        try:
            return dict(client(options).head_object(Bucket=bucket, Key=key))
        except Exception as exc:
            if _not_found(exc):
                return None
            raise


def get_range(options: StorageOptions, bucket: str, key: str, byte_range: str) -> tuple[bytes, str | None]:
    """Some bytes of an object (``byte_range``: ``bytes=0-99``, ``bytes=-100`` for the last 100)
    and the ``Content-Range`` it answered with (``bytes 0-99/2000``: the size is behind the slash;
    None when the whole object came, as for one smaller than asked); :class:`FileNotFoundError`
    if absent."""
    with _as_os_errors(bucket, key):
        try:
            response, body = _read_body(
                options, lambda: client(options).get_object(Bucket=bucket, Key=key, Range=byte_range))
        except Exception as exc:
            if _not_found(exc):
                raise FileNotFoundError(f"s3://{bucket}/{key}") from None
            if _code(exc)[1] == 416:  # no byte of an empty object is in any range
                return b"", "bytes */0"
            raise
    return body, response.get("ContentRange")


def open_stream(options: StorageOptions, bucket: str, key: str) -> Any:
    """An object's body as a stream (one GET, read as it is consumed); :class:`FileNotFoundError`
    if absent."""
    with _as_os_errors(bucket, key):
        try:
            return client(options).get_object(Bucket=bucket, Key=key)["Body"]
        except Exception as exc:
            if _not_found(exc):
                raise FileNotFoundError(f"s3://{bucket}/{key}") from None
            raise


def delete(options: StorageOptions, bucket: str, key: str) -> None:
    """Delete an object (absent is fine): one DELETE, and no folder marker put back."""
    with _as_os_errors(bucket, key):
        client(options).delete_object(Bucket=bucket, Key=key)


def has_prefix(options: StorageOptions, bucket: str, prefix: str) -> bool:
    """Whether any object's key starts with ``prefix`` (a folder exists): one LIST of one key."""
    with _as_os_errors(bucket, prefix):
        response = client(options).list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    return bool(response.get("KeyCount") or response.get("Contents"))


def delete_prefix(options: StorageOptions, bucket: str, prefix: str) -> int:
    """Delete every object under ``prefix`` (a folder): a listing, then one multi-object delete per
    1000 keys; how many were deleted. Never a whole bucket (an empty prefix), as pyarrow refuses too."""
    if not prefix.strip("/"):
        raise HudiError(f"refusing to delete everything in bucket {bucket}: pyhudi deletes folders below a "
                        "table's path only")
    with _as_os_errors(bucket, prefix):
        pages = list(client(options).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix))
    keys = [o["Key"] for page in pages for o in page.get("Contents") or []]
    delete_keys(options, bucket, keys, shown=prefix)
    return len(keys)


def delete_keys(options: StorageOptions, bucket: str, keys: list[str], *, shown: str) -> None:
    """Delete objects by key (absent ones too): one multi-object delete per 1000 keys; ``shown``
    names them in an error."""
    s3 = client(options)
    for start in range(0, len(keys), 1000):
        chunk = [{"Key": k} for k in keys[start:start + 1000]]
        with _as_os_errors(bucket, shown):
            response = s3.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise HudiError(f"could not delete s3://{bucket}/{first.get('Key')} ({first.get('Code')}: "
                            f"{first.get('Message')}) and {len(errors) - 1} more under s3://{bucket}/{shown}; "
                            "check the credentials' s3:DeleteObject permission and run again")


def store_time_ms(options: StorageOptions, bucket: str) -> int:
    """The store's clock (its ``Date`` header), so that ages of heartbeats and leases do not depend
    on this machine's clock. One HEAD of the bucket."""
    with _as_os_errors(bucket, ""):
        response = client(options).head_bucket(Bucket=bucket)
    return _store_time_ms(response)


class Upload(io.BytesIO):
    """An output stream to an S3 object: buffered, written on ``close`` with one PUT (or a
    multipart upload past :data:`SINGLE_PUT_LIMIT`); nothing is visible if writing fails."""

    def __init__(self, options: StorageOptions, bucket: str, key: str) -> None:
        super().__init__()
        self._target = (options, bucket, key)
        self._failed = False

    def abort(self) -> None:
        """Drop what was written: close without uploading."""
        self._failed = True
        self.close()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self._failed = True
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._failed:
                options, bucket, key = self._target
                size = self.tell()
                if size <= SINGLE_PUT_LIMIT:
                    put(options, bucket, key, self.getvalue())
                else:
                    from boto3.s3.transfer import TransferConfig
                    self.seek(0)
                    with _as_os_errors(bucket, key):
                        client(options).upload_fileobj(self, bucket, key, Config=TransferConfig(
                            multipart_threshold=SINGLE_PUT_LIMIT, multipart_chunksize=SINGLE_PUT_LIMIT))
        finally:
            super().close()
