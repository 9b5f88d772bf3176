"""Names of data files: base files ``{fileId}_{writeToken}_{instant}.parquet`` and log files.

The name carries the file group (fileId), the instant that wrote it and the Spark task that wrote
it (write token ``partition-stage-attempt``); the file-system view is built from names alone, so
these functions are the one place that formats and parses them.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Protocol

BASE_FILE_EXTENSION = ".parquet"
#: ``{fileId}_{writeToken}_{instantTime}.{extension}``
BASE_FILE_PATTERN = _BASE = re.compile(r"^([a-zA-Z0-9-]+)_([a-zA-Z0-9-]+)_([0-9]+)\.([a-zA-Z0-9]+)$")
_LOG = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(?:_((\d+)-(\d+)-(\d+))(\.cdc)?)?$")


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant_time: str
    extension: str

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}.{self.extension}"


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    #: the instant in the name: the base instant of its slice (table version 6), or the delta commit
    #: that wrote it (version 8+, whose readers find the slice by that commit's completion time)
    base_instant: str
    extension: str
    version: int
    write_token: str | None
    #: a change data file (``.cdc`` suffix) of a CDC-enabled table: not records of the file slice
    cdc: bool = False


#: Base file formats of Apache Hudi that pyhudi does not read (their extensions in file names).
UNREAD_BASE_FORMATS = {"orc": "ORC", "hfile": "HFILE", "lance": "LANCE"}


def parse_base_file(name: str) -> BaseFileName | None:
    m = _BASE.match(name)
    if not m:
        return None
    return BaseFileName(m.group(1), m.group(2), m.group(3), m.group(4))


def parse_log_file(name: str) -> LogFileName | None:
    m = _LOG.match(name)
    if not m:
        return None
    return LogFileName(m.group(1), m.group(2), m.group(3), int(m.group(4)), m.group(5), m.group(9) is not None)


class _LogName(Protocol):
    @property
    def base_instant(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def write_token(self) -> str | None: ...


def log_order(log: _LogName) -> tuple[str, int, str]:
    """Sort key of log files in the order readers apply them, Hudi's ``LogFileComparator``: by
    base instant, then version, then write token (none first).

    A file slice whose compaction is pending reads the previous slice's logs before those named
    with the compaction's instant; ordering by version alone would put the newer ``log.1`` first.
    """
    return log.base_instant, log.version, log.write_token or ""


def log_path_order(path: str) -> tuple[str, int, str]:
    """:func:`log_order` of a log file's path."""
    parsed = parse_log_file(path.rsplit("/", 1)[-1])
    if parsed is None:
        raise ValueError(f"{path} is not a log file name")
    return log_order(parsed)


def slice_key(name: str) -> tuple[str, str] | None:
    """(file id, base instant) of a data file name: the file slice a base or log file belongs to."""
    base = parse_base_file(name)
    if base is not None:
        return base.file_id, base.instant_time
    log = parse_log_file(name)
    if log is not None and log.extension == "log":
        return log.file_id, log.base_instant
    return None


def base_file_name(file_id: str, write_token: str, instant_time: str) -> str:
    return f"{file_id}_{write_token}_{instant_time}{BASE_FILE_EXTENSION}"


def log_file_name(file_id: str, base_instant: str, version: int, token: str) -> str:
    """``.{fileId}_{instant}.log.{version}_{writeToken}``: in table version 6 ``instant`` is the
    base instant of the slice the file extends; from version 8 it is the writing delta commit's."""
    return f".{file_id}_{base_instant}.log.{version}_{token}"


def write_token(task_partition: int, stage_id: int, attempt_id: int) -> str:
    """``FSUtils.makeWriteToken``: which task attempt wrote a file."""
    return f"{task_partition}-{stage_id}-{attempt_id}"


def new_file_id_prefix() -> str:
    return str(uuid.uuid4())


def file_id(prefix: str, index: int = 0) -> str:
    """``FSUtils.createNewFileId``: a UUID prefix plus a rollover index."""
    return f"{prefix}-{index}"


def new_file_id() -> str:
    return file_id(new_file_id_prefix(), 0)


def file_id_of(name: str) -> str | None:
    """The file group of a base file name (or of a ``_hoodie_file_name`` value)."""
    parsed = parse_base_file(name)
    return parsed.file_id if parsed else None


def relative_path(partition_path: str, name: str) -> str:
    return f"{partition_path}/{name}" if partition_path else name
