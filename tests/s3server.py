"""An S3 API server for the tests: moto's server (``moto[server]``) on 127.0.0.1, a process the
suite starts itself, and how the suite reaches it (Spark's Hadoop conf, boto3, hudi-rs).

It speaks the S3 protocol over HTTP, including the conditional writes (``If-None-Match``,
``If-Match``) pyhudi's atomic creation and storage lock rest on. Its log line per request lets
tests and the benchmark count requests by method.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, unquote

ACCESS_KEY = "pyhudi-test"
SECRET_KEY = "pyhudi-test-secret"
REGION = "us-east-1"
_REQUEST = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/[\d.]+" (\d{3})')
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class Request(NamedTuple):
    """One request the server answered: method (LIST for a bucket listing), key (a listing's
    prefix), query string and HTTP status."""

    method: str
    key: str
    query: str
    status: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """A running moto server: its endpoint, a boto3 client, and its request log."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "1"})
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).read()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start; see {log_path}") from None
                time.sleep(0.2)

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    @property
    def hadoop_conf(self) -> dict[str, str]:
        """The S3A settings a Spark user writes for this server."""
        return {"fs.s3a.endpoint": self.endpoint, "fs.s3a.access.key": ACCESS_KEY,
                "fs.s3a.secret.key": SECRET_KEY, "fs.s3a.path.style.access": "true",
                "fs.s3a.endpoint.region": REGION}

    @property
    def storage_options(self) -> dict[str, str]:
        """The same settings by hudi-rs's / delta-rs's names."""
        return {"aws_endpoint_url": self.endpoint, "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "aws_region": REGION, "aws_allow_http": "true"}

    def mark(self) -> int:
        """A position in the request log; :meth:`requests_since` counts from it."""
        self._log.flush()
        return self.log_path.stat().st_size

    def requests_since(self, mark: int, bucket: str | None = None) -> Counter[str]:
        """Requests by method (LIST is a GET of a bucket with a query) since ``mark``."""
        time.sleep(0.05)  # the server writes its log line after answering
        with open(self.log_path) as f:
            f.seek(mark)
            text = _COLOUR.sub("", f.read())
        counts: Counter[str] = Counter()
        for method, target, _status in _REQUEST.findall(text):
            path = target.split("?", 1)[0].strip("/")
            if bucket is not None and path.split("/", 1)[0] != bucket:
                continue
            if method == "GET" and "/" not in path and "?" in target:
                method = "LIST"
            counts[method] += 1
        return counts

    def request_log(self, mark: int, bucket: str) -> list[Request]:
        """The requests to ``bucket`` since ``mark``, in order, for tests that look at keys (a HEAD
        of a key before its GET, a PUT of a folder marker, the prefixes listed)."""
        time.sleep(0.05)  # the server writes its log line after answering
        with open(self.log_path) as f:
            f.seek(mark)
            text = _COLOUR.sub("", f.read())
        out = []
        for method, target, status in _REQUEST.findall(text):
            path, _, query = target.partition("?")
            name, _, key = path.lstrip("/").partition("/")
            if name != bucket:
                continue
            if method == "GET" and not key and query:
                method = "LIST"
                key = parse_qs(query).get("prefix", [""])[0]
            out.append(Request(method, unquote(key), query, int(status)))
        return out

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()
