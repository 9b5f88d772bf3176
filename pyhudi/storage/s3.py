"""What pyarrow's S3 file system does not offer, through boto3: exclusive creation, single PUTs,
conditional replacement and the store's clock.

pyarrow writes every object as a three-request multipart upload and has no conditional PUT.
Timeline instants must be created exactly once (``If-None-Match: *``), the storage lock replaces
its file only if unchanged (``If-Match: <etag>``), and most files pyhudi writes are small, so those
go through boto3 here: one PUT each, retried by botocore's standard retry mode on throttling
(503 SlowDown) and dropped connections. Reads and listings stay on pyarrow.
"""

from __future__ import annotations

import email.utils
import io
import threading
from dataclasses import dataclass
from typing import Any

from pyhudi.errors import HudiError, HudiFileExistsError
from pyhudi.storage.options import StorageOptions

#: objects up to this size are written with one PUT; larger ones as a multipart upload
SINGLE_PUT_LIMIT = 64 * 1024 * 1024

_CLIENTS: dict[StorageOptions, Any] = {}
_CLIENTS_GUARD = threading.Lock()


class PreconditionFailed(HudiError):
    """A conditional write found the object changed (412) or raced another one (409)."""


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
        connect_timeout=10, read_timeout=60,
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


def _store_time_ms(response: dict[str, Any]) -> int:
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        import time
        return int(time.time() * 1000)
    return int(email.utils.parsedate_to_datetime(date).timestamp() * 1000)


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
    try:
        return str(client(options).put_object(**kwargs).get("ETag", ""))
    except Exception as exc:
        if _is_client_error(exc):
            code, status = _code(exc)
            if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise PreconditionFailed(f"s3://{bucket}/{key}: {code or status}") from None
        raise


def create_new(options: StorageOptions, bucket: str, key: str, data: bytes, shown: str) -> None:
    """Create an object that must not exist: :class:`HudiFileExistsError` if it does."""
    try:
        put(options, bucket, key, data, if_none_match=True)
    except PreconditionFailed:
        raise HudiFileExistsError(f"{shown} already exists; another writer may be using this name") from None


def get(options: StorageOptions, bucket: str, key: str) -> ObjectState | None:
    """An object's bytes and entity tag, None if absent (one GET, no HEAD first)."""
    try:
        response = client(options).get_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if _is_client_error(exc) and (_code(exc)[0] in ("NoSuchKey", "404") or _code(exc)[1] == 404):
            return None
        raise
    return ObjectState(str(response.get("ETag", "")), response["Body"].read(), _store_time_ms(response))


def store_time_ms(options: StorageOptions, bucket: str) -> int:
    """The store's clock (its ``Date`` header), so that ages of heartbeats and leases do not depend
    on this machine's clock. One HEAD of the bucket."""
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
                    client(options).upload_fileobj(self, bucket, key, Config=TransferConfig(
                        multipart_threshold=SINGLE_PUT_LIMIT, multipart_chunksize=SINGLE_PUT_LIMIT))
        finally:
            super().close()
