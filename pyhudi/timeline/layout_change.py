"""The active timeline rewritten in the other layout: the timeline part of an upgrade from table
version 6 to 8 and of a downgrade back (docs/hudi-1x-format.md section 6).

Layout 1 keeps instants in ``.hoodie/`` named ``T.action`` with commit metadata as JSON; layout 2
keeps them in ``.hoodie/timeline/`` named ``T_C.action`` (``C``: the completion time) with commit
metadata as Avro, and calls a pending clustering ``clustering`` where layout 1 says
``replacecommit``. Apache Hudi's upgrade moves file by file; here every file of the new layout is
written first (:func:`write_converted`), the table's ``hoodie.properties`` then switches the
layout in one update (the caller's step, the one moment the table changes), and only then are the
old files removed (:func:`remove_old`). A crash before the switch leaves the table as it was (the
next attempt writes the new files again); a crash after it leaves old files no reader of the new
layout looks at, removed by the next attempt.

Completion times: layout 1 has none but the file's modification time, which becomes ``C`` going
up (as Hudi does; never earlier than ``T``); going down, ``C`` becomes the new file's modification
time where the store lets pyhudi set it (local disk), so that readers of layout 1 who order by it
still see the completion order.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from pyhudi.instant_time import format_instant, parse_instant_time
from pyhudi.storage import Storage
from pyhudi.timeline import commit_avro
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import CLUSTERING, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, Instant, State
from pyhudi.timeline.timeline import Timeline

_COMMITS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)


@dataclass(frozen=True)
class Conversion:
    """What :func:`write_converted` wrote: the new files, and the old ones to remove after the switch."""

    written: tuple[str, ...]
    old: tuple[str, ...]


def _completion_from_mtime(mtime_ns: int | None, requested: str, *, utc: bool) -> str:
    if not mtime_ns:
        return requested
    moment = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.timezone.utc)
    if not utc:
        moment = moment.astimezone()
    return max(format_instant(moment.replace(tzinfo=None)), requested)


def _is_clustering(content: bytes, source: str) -> bool:
    return bool(content) and read_record(content, source=source).get("operationType") == "CLUSTER"


def _to_json(content: bytes, source: str) -> bytes:
    return commit_avro.decode(content, source=source).to_json().encode("utf-8") if content else b""


def converted(source: Timeline, target: Timeline, instant: Instant, content: bytes, *,
              utc: bool) -> tuple[Instant, bytes]:
    """``instant`` of ``source`` and its file's content as ``target``'s layout names and holds it."""
    where = source.path_of(instant)
    action, completion = instant.action, instant.completion_time
    if target.layout_version >= 2:
        if instant.is_completed:
            completion = _completion_from_mtime(source.mtime_ns(instant), instant.timestamp, utc=utc)
        elif action == REPLACE_COMMIT:
            requested = content if instant.state == State.REQUESTED else source.storage.read_bytes_or_none(
                source.path_of(instant.with_state(State.REQUESTED))) or b""
            if _is_clustering(requested, where):
                action = CLUSTERING
        if action in _COMMITS and content.lstrip().startswith(b"{") and instant.state != State.REQUESTED:
            content = commit_avro.encode(content, replace=action == REPLACE_COMMIT and instant.is_completed)
    else:
        completion = None
        if action == CLUSTERING:
            action = REPLACE_COMMIT
        if action in _COMMITS and content and not content.lstrip().startswith(b"{") \
                and instant.state != State.REQUESTED:
            content = _to_json(content, where)
    return Instant(instant.timestamp, instant.state, action, completion), content


def write_converted(storage: Storage, *, to_layout: int, utc: bool = False) -> Conversion:
    """Write the active timeline of the table at ``storage`` in layout ``to_layout`` beside the
    current one (which stays as it is); the caller switches ``hoodie.properties`` next."""
    source = Timeline(storage, layout_version=2 if to_layout == 1 else 1, utc=utc)
    target = Timeline(storage, layout_version=to_layout, utc=utc)
    if to_layout >= 2:
        storage.mkdirs(f"{target.folder}/history")  # as Hudi lays out a layout-2 table (no folders on object stores)
    for leftover in target.instant_files:  # an earlier attempt that died before the switch
        storage.discard(target.path_of(leftover))
    written, old = [], []
    for instant in source.instant_files:
        content = source.read_bytes(instant)
        new, data = converted(source, target, instant, content, utc=utc)
        path = target.path_of(new)
        storage.write_bytes(path, data)
        if to_layout == 1 and new.is_completed and instant.completion_time and storage.is_local:
            stamp = parse_instant_time(instant.completion_time)
            seconds = (stamp.replace(tzinfo=dt.timezone.utc) if utc else stamp.astimezone()).timestamp()
            os.utime(storage.full(path), (seconds, seconds))
        written.append(path)
        old.append(source.path_of(instant))
    return Conversion(tuple(written), tuple(old))


def remove_old(storage: Storage, conversion: Conversion) -> None:
    """Delete the files of the layout the table left (after ``hoodie.properties`` switched)."""
    for path in conversion.old:
        storage.discard(path)
