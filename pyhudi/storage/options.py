"""Where a table lives and how to reach it: the URI scheme and the store's connection settings.

Users name tables the way Spark does (``s3a://bucket/t``, ``gs://...``, ``abfss://...``, local
paths) and configure the store the way their Spark jobs already do. :func:`resolve_options` is the
one place that turns those sources into :class:`StorageOptions`, most specific first:

1. explicit options, in a write's or read's option mapping (or ``storage_options``): Hadoop's keys
   (``fs.s3a.endpoint``, also with a ``spark.hadoop.`` or ``hadoop.`` prefix) or the keys hudi-rs and
   delta-rs take (``aws_endpoint_url``, ``aws_access_key_id``, ...);
2. the SparkSession's Hadoop configuration (``spark.hadoop.fs.s3a.*``), per-bucket entries
   ``fs.s3a.bucket.<bucket>.*`` before the general ones, as S3A reads them;
3. the standard AWS environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``...).

The result is a frozen, picklable value: it travels inside every :class:`~pyhudi.storage.Storage`
to executors, the metadata table, locks and table services, so nothing there re-reads the sources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from pyhudi.errors import HudiConfigError, HudiUnsupportedError

LOCAL_SCHEMES = ("", "file")
S3_SCHEMES = ("s3", "s3a", "s3n")
GCS_SCHEMES = ("gs", "gcs")
AZURE_SCHEMES = ("abfs", "abfss")
HDFS_SCHEMES = ("hdfs",)
SUPPORTED_SCHEMES = ("file", *S3_SCHEMES, *GCS_SCHEMES, *AZURE_SCHEMES, *HDFS_SCHEMES)

#: S3A settings pyhudi applies, by their Hadoop name under ``fs.s3a.`` (per bucket:
#: ``fs.s3a.bucket.<bucket>.<name>``)
_S3A = {
    "endpoint": "endpoint",
    "endpoint.region": "region",
    "access.key": "access_key",
    "secret.key": "secret_key",
    "session.token": "session_token",
    "path.style.access": "path_style",
    "connection.ssl.enabled": "ssl",
    "create.conditional.enabled": "conditional_create",
    "attempts.maximum": "max_attempts",
    "connection.establish.timeout": "connect_timeout_s",
    "connection.timeout": "read_timeout_s",
    "aws.credentials.provider": "credentials_provider",
}
#: the same settings by the names hudi-rs / delta-rs (object_store) take
_OBJECT_STORE = {
    "aws_endpoint_url": "endpoint",
    "aws_endpoint": "endpoint",
    "aws_region": "region",
    "aws_access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "aws_session_token": "session_token",
    "aws_virtual_hosted_style_request": "virtual_hosted",
    "aws_allow_http": "allow_http",
    "aws_skip_signature": "anonymous",
}
#: the standard AWS environment, read last
_ENV = {
    "AWS_ENDPOINT_URL_S3": "endpoint",
    "AWS_ENDPOINT_URL": "endpoint",
    "AWS_REGION": "region",
    "AWS_DEFAULT_REGION": "region",
    "AWS_ACCESS_KEY_ID": "access_key",
    "AWS_SECRET_ACCESS_KEY": "secret_key",
    "AWS_SESSION_TOKEN": "session_token",
}
_ANONYMOUS_PROVIDER = "AnonymousAWSCredentialsProvider"


def split_uri(uri: str) -> tuple[str, str, str]:
    """(scheme, authority, path) of a table URI; a plain path has scheme ``""``."""
    if uri[:6].lower() == "file:/" and uri[:7].lower() != "file://":  # Hadoop's form of a local URI (file:/x)
        return "file", "", uri[5:]
    if "://" not in uri:
        return "", "", uri
    parts = urlsplit(uri)
    return parts.scheme.lower(), parts.netloc, parts.path


def check_scheme(uri: str) -> str:
    """The URI's scheme if pyhudi can store tables there; a :class:`HudiUnsupportedError` otherwise."""
    scheme, authority, _ = split_uri(uri)
    if scheme not in (*LOCAL_SCHEMES, *SUPPORTED_SCHEMES):
        raise HudiUnsupportedError(
            f"{uri}: pyhudi cannot store tables on '{scheme}://'; it supports local paths, file://, "
            "s3:// s3a:// s3n:// (S3 and S3-compatible stores), gs:// (Google Cloud Storage), "
            "abfs:// abfss:// (Azure Data Lake Storage Gen2) and hdfs://")
    if scheme and scheme != "file" and not authority:
        raise HudiConfigError(f"{uri}: a {scheme}:// path names its bucket or host: {scheme}://<bucket>/<path>")
    return scheme


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise HudiConfigError(f"storage option {key}={value!r} is not a boolean (true or false)")


@dataclass(frozen=True)
class StorageOptions:
    """Connection settings of one store (S3 keys today; other schemes take the SDK defaults).

    ``endpoint`` may carry its scheme (``http://127.0.0.1:9000``); without one, ``ssl`` decides it.
    ``conditional_create`` says the store honours ``If-None-Match: *`` (AWS S3 does since 2024; some
    S3-compatible stores do not): without it no file can be created exclusively, and pyhudi refuses
    configurations with more than one writer. ``max_attempts`` bounds the retries of throttled
    (503 SlowDown), failed (5xx) and timed-out requests, which back off exponentially;
    ``connect_timeout_s`` / ``read_timeout_s`` (Hadoop's ``fs.s3a.connection.establish.timeout``
    / ``fs.s3a.connection.timeout``) end a connection attempt / a stalled read, which is then retried."""

    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    path_style: bool | None = None
    ssl: bool = True
    anonymous: bool = False
    conditional_create: bool = True
    max_attempts: int = 10
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    extra: tuple[tuple[str, str], ...] = field(default=())

    @property
    def endpoint_url(self) -> str | None:
        """The endpoint as a URL with its scheme (what boto3 and pyarrow take)."""
        if not self.endpoint:
            return None
        if "://" in self.endpoint:
            return self.endpoint
        return ("https://" if self.ssl else "http://") + self.endpoint

    def __repr__(self) -> str:  # never print secrets
        shown = {k: v for k, v in (("endpoint", self.endpoint), ("region", self.region),
                                   ("path_style", self.path_style)) if v is not None}
        creds = "explicit keys" if self.access_key else ("anonymous" if self.anonymous else "SDK default chain")
        return f"StorageOptions({', '.join(f'{k}={v!r}' for k, v in shown.items())}, credentials={creds})"


#: Hadoop duration suffixes (``30s``, ``200000ms``...); a bare number is milliseconds, as in Hadoop 3.3
_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _seconds(key: str, value: Any) -> float:
    text = str(value).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number):].strip() or "ms"
    try:
        seconds = float(number) * _UNITS[unit]
    except (KeyError, ValueError):
        raise HudiConfigError(f"storage option {key}={value!r} is not a duration (milliseconds, or a number "
                              "with a unit: 30s, 200000ms, 5m)") from None
    if seconds <= 0:
        raise HudiConfigError(f"storage option {key}={value!r} must be longer than zero")
    return seconds


def _apply(values: dict[str, Any], name: str, key: str, value: Any) -> None:
    if value is None or name in values:
        return
    if name in ("path_style", "ssl", "conditional_create", "anonymous"):
        values[name] = _bool(key, value)
    elif name == "virtual_hosted":
        values.setdefault("path_style", not _bool(key, value))
    elif name == "allow_http":
        values.setdefault("ssl", not _bool(key, value))
    elif name == "max_attempts":
        try:
            values[name] = max(1, int(value))
        except ValueError:
            raise HudiConfigError(f"storage option {key}={value!r} is not a whole number") from None
    elif name in ("connect_timeout_s", "read_timeout_s"):
        values[name] = _seconds(key, value)
    elif name == "credentials_provider":
        if _ANONYMOUS_PROVIDER in str(value):
            values["anonymous"] = True
    else:
        values[name] = str(value)


def _hadoop_keys(source: Mapping[str, Any]) -> dict[str, Any]:
    """Hadoop keys of a mapping, with any ``spark.hadoop.`` / ``hadoop.`` prefix removed."""
    out: dict[str, Any] = {}
    for key, value in source.items():
        for prefix in ("spark.hadoop.", "hadoop."):
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        if key.startswith("fs."):
            out[key] = value
    return out


def _from_hadoop(values: dict[str, Any], hadoop: Mapping[str, Any], bucket: str) -> None:
    for scope in (f"fs.s3a.bucket.{bucket}.", "fs.s3a."):
        for suffix, name in _S3A.items():
            key = scope + suffix
            if key in hadoop:
                _apply(values, name, key, hadoop[key])


def is_storage_key(key: str) -> bool:
    """Whether an option key configures the store (so a write's options may carry it)."""
    return bool(_hadoop_keys({key: None})) or key in _OBJECT_STORE


def resolve_options(uri: str, explicit: Mapping[str, Any] | None = None,
                    hadoop: Mapping[str, Any] | None = None,
                    env: Mapping[str, str] | None = None) -> StorageOptions:
    """The store settings for ``uri``: explicit options, then the Hadoop configuration, then the
    environment (``os.environ`` unless given)."""
    scheme = check_scheme(uri)
    if scheme not in S3_SCHEMES:
        return StorageOptions()
    bucket = split_uri(uri)[1]
    values: dict[str, Any] = {}
    explicit = explicit or {}
    for key, name in _OBJECT_STORE.items():
        if key in explicit:
            _apply(values, name, key, explicit[key])
    _from_hadoop(values, _hadoop_keys(explicit), bucket)
    _from_hadoop(values, _hadoop_keys(hadoop or {}), bucket)
    for key, name in _ENV.items():
        _apply(values, name, key, (os.environ if env is None else env).get(key))
    return replace(StorageOptions(), **values)
