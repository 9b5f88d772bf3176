"""Direct write markers: ``.hoodie/.temp/<instant>/<partition>/<file>.marker.<IOType>``.

An executor creates a marker before it creates a data file. If the writer dies, the markers list
every file the failed instant may have left behind, so the rollback deletes exactly those instead
of scanning the table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pyhudi.storage import Storage

log = logging.getLogger("pyhudi")

TEMP_FOLDER = ".hoodie/.temp"
CREATE = "CREATE"
MERGE = "MERGE"
APPEND = "APPEND"


def marker_folder(instant: str) -> str:
    return f"{TEMP_FOLDER}/{instant}"


def create_marker(storage: Storage, instant: str, data_file: str, io_type: str) -> None:
    """``data_file`` is relative to the base path (partition/name). A marker is an empty file, so it
    is created in place (:meth:`~pyhudi.storage.Storage.touch`), as Hudi creates it: no temporary
    file, rename or sync, which a file with content needs to appear whole."""
    storage.touch(marker_path(instant, data_file, io_type))


def delete_marker(storage: Storage, instant: str, data_file: str, io_type: str) -> None:
    """Withdraw a marker whose file this task did not create after all (the name was taken)."""
    storage.delete(marker_path(instant, data_file, io_type))


def list_markers(storage: Storage, instant: str) -> list[tuple[str, str]]:
    """(data file relative path, io type) for every marker of an instant."""
    folder = marker_folder(instant)
    out = []
    prefix = folder + "/"
    for rel, _info in storage.walk_files(folder):
        inner = rel[len(prefix):] if rel.startswith(prefix) else rel
        if ".marker." not in inner:
            continue
        data_file, io_type = inner.rsplit(".marker.", 1)
        out.append((data_file, io_type))
    return sorted(out)


def marker_path(instant: str, data_file: str, io_type: str) -> str:
    """The marker of ``data_file`` (relative to the base path), relative to the base path."""
    return f"{marker_folder(instant)}/{data_file}.marker.{io_type}"


def delete_markers(storage: Storage, instant: str, *, markers: Iterable[tuple[str, str]] | None = None) -> None:
    """Delete an instant's markers; ``markers``: all of them, as :func:`list_markers` returned them
    just before (or as the caller wrote them), so that an object store is not listed again."""
    files = None if markers is None else [marker_path(instant, f, io) for f, io in markers]
    storage.delete_dir(marker_folder(instant), files=files)


def remove_marked_files(storage: Storage, instant: str, *, keep: frozenset[str] = frozenset()) -> None:
    """Delete every data file the instant's markers name (but ``keep``), then the markers: what a
    table service's dead attempt, or its run that another process undid, left behind. Only for
    instants that write new files (compaction, clustering); a write's appends to existing log
    files are undone by a rollback instead."""
    for path, _io in list_markers(storage, instant):
        if path not in keep:
            storage.delete(path)
    delete_markers(storage, instant)


def remove_stray_files(storage: Storage, instant: str, written: Iterable[str], *,
                       markers: list[tuple[str, str]] | None = None) -> list[str]:
    """Delete the new base files ``instant``'s markers name but its write statistics (``written``,
    relative paths) do not, before the instant completes; returns them.

    A Spark task that failed or was outrun by a speculative copy may have written a whole or partial
    file under the instant's name before its retry wrote the one the commit records. Readers take
    every base file of a completed instant, so such a file would show as duplicate records, or fail
    to read. Hudi reconciles against its markers the same way. Log files (APPEND markers) are left:
    the retry appends to them too. ``markers``: the instant's markers as just listed (default:
    list them).
    """
    keep = set(written)
    # a marker whose task wrote no file after all (nothing to write) names nothing to delete
    strays = [path for path, io in (list_markers(storage, instant) if markers is None else markers)
              if io in (CREATE, MERGE) and path not in keep and storage.delete(path)]
    if strays:
        log.warning("%s: removed %d file(s) of failed task attempts: %s", instant, len(strays), ", ".join(strays[:3]))
    return strays
