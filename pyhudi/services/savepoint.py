"""Savepoints: commits whose snapshot the cleaner must keep, so the table can be read or restored there.

A savepoint of commit T lists every file of the snapshot as of T (base files and, for
merge-on-read, the log files of those slices) in ``T.savepoint`` (HoodieSavepointMetadata). The
cleaner never deletes a listed file, archival stops before the oldest savepoint, and
``restore`` can bring the table back to T. A savepoint can only be taken while the snapshot is
still whole: once the cleaner removed part of it, there is nothing left to save.
"""

from __future__ import annotations

import getpass
import time

from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiInstantNotFoundError
from pyhudi.plans.savepoint import Savepoint, savepoint_of
from pyhudi.read.retention import Retention
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import SAVEPOINT_METADATA, write_record
from pyhudi.timeline.instant import SAVEPOINT, State
from pyhudi.transaction.lock import under_table_lock


@under_table_lock
def create_savepoint(table: HudiTable, instant: str | None = None, *, user: str | None = None,
                     comments: str = "", cfg: HudiConfig | None = None) -> Savepoint:
    """Savepoint completed commit ``instant`` (default: the latest)."""
    table.check_writable("savepoint")
    timeline = table.timeline.reload()
    writes = timeline.completed_writes()
    if instant is None:
        if not writes:
            raise HudiInstantNotFoundError(f"{table.path} has no completed commit to savepoint")
        instant = writes[-1].timestamp
    if not any(w.timestamp == instant for w in writes):
        raise HudiInstantNotFoundError(f"{instant} is not a completed commit of {table.path}; savepoints are "
                                       "taken of completed commits (`pyhudi show commits` lists them)")
    if any(s.timestamp == instant for s in timeline.completed([SAVEPOINT])):
        raise HudiInstantNotFoundError(f"commit {instant} already has a savepoint")
    Retention(table.storage, timeline).check(instant, purpose="savepoint")
    view = table.file_system_view(as_of=instant)
    files: dict[str, list[str]] = {p: [] for p in view.partitions}
    for piece in view.latest_slices():
        names = files.setdefault(piece.partition_path, [])
        if piece.base_file is not None:
            names.append(piece.base_file.name)
        names.extend(lf.name for lf in piece.log_files)
    record = {
        "savepointedBy": user or _user(),
        "savepointedAt": int(time.time() * 1000),
        "comments": comments,
        "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": sorted(names)}
                              for p, names in sorted(files.items())},
        "version": 1,
    }
    if not timeline.has_state(instant, State.INFLIGHT, SAVEPOINT):  # else a creation that died: finish it
        timeline.transition_inflight(instant, SAVEPOINT)
    done = CommitPoint.of(table, cfg).complete(timeline, instant, SAVEPOINT, write_record(SAVEPOINT_METADATA, record))
    return savepoint_of(timeline, done)  # in layout 2 the completed file's name carries its completion time


@under_table_lock
def delete_savepoint(table: HudiTable, instant: str, *, cfg: HudiConfig | None = None) -> None:
    """Remove a savepoint (or what a creation that died left of one); no data file is touched."""
    table.check_writable("savepoint deletion")
    timeline = table.timeline.reload()
    if not any(s.timestamp == instant for s in timeline.instants() if s.action == SAVEPOINT):
        raise HudiInstantNotFoundError(f"there is no savepoint at {instant}; `pyhudi savepoint list` shows them")
    timeline.delete_instant(instant, SAVEPOINT)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return "pyhudi"

