"""The report's pictures: PNG charts drawn with matplotlib from :class:`~pyhudi.report.facts.TableFacts`.

Each function returns one :class:`Chart`. A chart with nothing to show (no log files on a
copy-on-write table, no index statistics from another writer) still draws a frame saying why, so
a reader never wonders whether a picture failed.
"""

from __future__ import annotations

import datetime as dt
import io
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyhudi.report.facts import InstantFacts, TableFacts

MB = 1024 * 1024
#: at most this many partitions are drawn (those with the most file groups)
MAX_PARTITIONS = 40
#: at most this many recent writes are drawn per-commit
MAX_COMMITS = 100
COLORS = {"commit": "#4c72b0", "deltacommit": "#55a868", "replacecommit": "#8172b2", "compaction": "#937860",
          "clean": "#8c8c8c", "rollback": "#c44e52", "restore": "#c44e52", "savepoint": "#ccb974",
          "indexing": "#64b5cd"}
DPI = 80


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    caption: str
    png: bytes


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _figure(height: float = 3.2, *, bottom: float = 0.3) -> tuple[Any, Any]:
    """A figure with fixed margins (fitting them to the labels would draw every chart twice)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, height), dpi=DPI)
    fig.subplots_adjust(left=0.08, right=0.92, top=0.95, bottom=bottom)
    ax.grid(True, axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})
    _pyplot().close(fig)
    return buf.getvalue()


def _empty(ax: Any, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="#666666", fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])


def _labels(instants: Sequence[InstantFacts]) -> list[str]:
    """Short x labels: the instant's time of day (with the date where it changes)."""
    out, day = [], None
    for i in instants:
        t = i.requested_at
        out.append(t.strftime("%m-%d %H:%M:%S") if t.date() != day else t.strftime("%H:%M:%S"))
        day = t.date()
    return out


def _commit_axis(ax: Any, instants: Sequence[InstantFacts]) -> None:
    xs = range(len(instants))
    step = max(1, len(instants) // 20)
    ax.set_xticks(list(xs)[::step])
    ax.set_xticklabels(_labels(instants)[::step], rotation=45, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(instants) - 0.4)


def timeline_chart(facts: TableFacts, *, now: dt.datetime | None = None) -> Chart:
    """Each instant as a bar from requested to completed, one lane per action; pending ones run to
    now (hatched), writes a rollback undid are red crosses."""
    fig, ax = _figure(3.6)
    lanes = sorted({i.action for i in facts.instants}, key=lambda a: list(COLORS).index(a) if a in COLORS else 99)
    now = now or dt.datetime.now()
    if not facts.instants:
        _empty(ax, "the active timeline is empty")
    for y, action in enumerate(lanes):
        mine = [i for i in facts.instants if i.action == action]
        done = [(i.requested_at, (i.completed_at or i.requested_at) - i.requested_at) for i in mine
                if i.state == "COMPLETED"]
        color = COLORS.get(action, "#333333")
        if done:
            ax.broken_barh(done, (y - 0.3, 0.6), facecolors=color)
            ax.scatter([s for s, _ in done], [y] * len(done), s=8, color=color, zorder=3)
        pending = [(i.requested_at, now - i.requested_at) for i in mine if i.state in ("REQUESTED", "INFLIGHT")]
        if pending:
            ax.broken_barh(pending, (y - 0.3, 0.6), facecolors="none", edgecolors="#dd8452", hatch="///")
        undone = [i.requested_at for i in mine if i.state == "ROLLED_BACK"]
        if undone:
            ax.scatter(undone, [y] * len(undone), marker="x", s=50, color="#c44e52", zorder=4)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes)
    ax.set_ylim(-0.7, max(len(lanes), 1) - 0.3)
    fig.autofmt_xdate()
    counts = Counter(i.state for i in facts.instants)
    caption = (f"{len(facts.instants)} instants: {counts.get('COMPLETED', 0)} completed, "
               f"{counts.get('REQUESTED', 0) + counts.get('INFLIGHT', 0)} pending (hatched, to now), "
               f"{counts.get('ROLLED_BACK', 0)} rolled back (red crosses). Bars run from requested to completed.")
    return Chart("timeline", "Timeline", caption, _png(fig))


def writes_chart(facts: TableFacts) -> Chart:
    writes = facts.writes()[-MAX_COMMITS:]
    fig, ax = _figure()
    if not writes:
        _empty(ax, "no completed writes")
    else:
        xs = list(range(len(writes)))
        ax.bar(xs, [w.records_written for w in writes], color=[COLORS.get(w.action, "#333") for w in writes])
        ax.set_ylabel("records written")
        twin = ax.twinx()
        twin.plot(xs, [w.bytes_written / MB for w in writes], color="#dd8452", marker=".", linewidth=1)
        twin.set_ylabel("MB written", color="#dd8452")
        _commit_axis(ax, writes)
    caption = (f"The last {len(writes)} completed writes (compactions and clusterings included): records "
               "written per commit (bars, colored by action) and bytes written (line).")
    return Chart("writes", "Records and bytes written", caption, _png(fig))


def _top_partitions(facts: TableFacts) -> list[str]:
    groups = Counter(s.partition for s in facts.slices)
    return sorted(p for p, _ in groups.most_common(MAX_PARTITIONS))


def file_sizes_chart(facts: TableFacts) -> Chart:
    parts = _top_partitions(facts)
    fig, ax = _figure(3.6)
    based = [s for s in facts.slices if s.base_bytes and s.partition in parts]
    if not based:
        _empty(ax, "no base files")
    else:
        index = {p: n for n, p in enumerate(parts)}
        xs = [index[s.partition] + ((zlib.crc32(s.file_id.encode()) % 41) - 20) / 70 for s in based]
        ax.scatter(xs, [s.base_bytes / MB for s in based], s=10, alpha=0.7, color="#4c72b0")
        ax.axhline(facts.max_file_size / MB, color="#55a868", linestyle="--", linewidth=1,
                   label=f"hoodie.parquet.max.file.size {facts.max_file_size / MB:.0f} MB")
        if facts.small_file_limit:
            ax.axhline(facts.small_file_limit / MB, color="#c44e52", linestyle=":", linewidth=1,
                       label=f"hoodie.parquet.small.file.limit {facts.small_file_limit / MB:.0f} MB")
        ax.legend(loc="upper right", fontsize=8)
        ax.set_ylabel("base file MB")
        ax.set_xticks(range(len(parts)))
        ax.set_xticklabels([p or "(root)" for p in parts], rotation=60, ha="right", fontsize=7)
    small = sum(1 for s in facts.slices if s.base_bytes and s.base_bytes < facts.small_file_limit)
    shown = "" if len({s.partition for s in facts.slices}) <= MAX_PARTITIONS else \
        f" The {MAX_PARTITIONS} partitions with the most file groups are drawn."
    caption = (f"Size of each latest base file, by partition, against the target and the small-file limit: "
               f"{small} of {sum(1 for s in facts.slices if s.base_bytes)} base files are under the limit.{shown}")
    return Chart("file_sizes", "Base file sizes per partition", caption, _png(fig))


def file_groups_chart(facts: TableFacts) -> Chart:
    parts = _top_partitions(facts)
    fig, ax = _figure()
    if not parts:
        _empty(ax, "no file groups")
    else:
        groups = Counter(s.partition for s in facts.slices)
        ax.bar(range(len(parts)), [groups[p] for p in parts], color="#8172b2")
        ax.set_ylabel("file groups")
        ax.set_xticks(range(len(parts)))
        ax.set_xticklabels([p or "(root)" for p in parts], rotation=60, ha="right", fontsize=7)
    caption = f"{len(facts.slices)} file groups in {len({s.partition for s in facts.slices})} partitions."
    return Chart("file_groups", "File groups per partition", caption, _png(fig))


def log_ratio_chart(facts: TableFacts) -> Chart:
    fig, ax = _figure()
    ratios = [s.log_to_base for s in facts.slices if s.log_to_base is not None and s.log_files]
    if facts.table_type != "MERGE_ON_READ":
        _empty(ax, "copy-on-write table: no log files")
        caption = "Copy-on-write tables rewrite base files; there are no log files."
    elif not ratios:
        _empty(ax, "no file slice has log files (all compacted)")
        caption = "No latest file slice has log files."
    else:
        ax.hist(ratios, bins=min(40, max(5, len(ratios) // 3)), color="#55a868")
        ax.set_xlabel("log bytes / base bytes of a file slice")
        ax.set_ylabel("file slices")
        caption = (f"{len(ratios)} file slices carry log files; median log-to-base ratio "
                   f"{sorted(ratios)[len(ratios) // 2]:.2f}, largest {max(ratios):.2f}.")
    return Chart("log_ratio", "Log-to-base ratio per file slice", caption, _png(fig))


def amplification_chart(facts: TableFacts) -> Chart:
    ingests = [w for w in facts.ingests() if w.amplification is not None][-MAX_COMMITS:]
    fig, ax = _figure()
    if not ingests:
        _empty(ax, "no ingesting writes with inserts or updates")
    else:
        values = [w.amplification or 0 for w in ingests]
        ax.bar(range(len(ingests)), values, color="#c44e52")
        if max(values) > 50 * max(min(values), 1e-9):  # appends and rewrites side by side
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(_pyplot().NullFormatter())
        ax.set_ylabel("bytes written / incoming bytes")
        _commit_axis(ax, ingests)
    caption = ("Write amplification of each ingesting commit: bytes written divided by the bytes of its incoming "
               "records (each record counted at the size the file it went to stores it). 1 is an append; a "
               "copy-on-write update rewrites whole files.")
    return Chart("amplification", "Write amplification", caption, _png(fig))


def index_chart(facts: TableFacts) -> Chart:
    rows = [w for w in facts.ingests() if w.index][-MAX_COMMITS:]
    fig, ax = _figure()
    series = (("files_in_partitions", "files in the partitions", "#8c8c8c"),
              ("files_after_range_pruning", "after key-range pruning", "#4c72b0"),
              ("files_after_bloom", "after bloom filters", "#55a868"),
              ("false_positives", "bloom false positives", "#c44e52"))
    if not rows:
        _empty(ax, "no index statistics (writes by other engines, or no lookups)")
    else:
        for key, label, color in series:
            ax.plot(range(len(rows)), [float((w.index or {}).get(key) or 0) for w in rows], label=label,
                    color=color, marker="o", markersize=3, linewidth=1.2, drawstyle="steps-mid")
        ax.legend(loc="upper left", fontsize=8)
        ax.set_ylabel("files / keys")
        _commit_axis(ax, rows)
    types = sorted({str((w.index or {}).get("index_type")) for w in rows})
    caption = (f"Index lookups of the last {len(rows)} writes that looked keys up ({', '.join(types) or 'none'}): "
               "candidate files, what key ranges and bloom filters left, and bloom false positives (keys the "
               "filters let through that the files did not hold).")
    return Chart("index", "Index efficiency", caption, _png(fig))


def phases_chart(facts: TableFacts) -> Chart:
    rows = [w for w in facts.ingests() if w.phases][-MAX_COMMITS:]
    fig, ax = _figure()
    names = sorted({k for w in rows for k in w.phases}, key=lambda k: -sum(w.phases.get(k, 0) for w in rows))
    if not rows:
        _empty(ax, "no phase times recorded (writes by other engines)")
    else:
        palette = ["#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd", "#937860", "#da8bc3",
                   "#8c8c8c"]
        ax.stackplot(range(len(rows)), [[float(w.phases.get(name, 0)) for w in rows] for name in names],
                     labels=names, colors=[palette[n % len(palette)] for n in range(len(names))], step="mid")
        ax.legend(loc="upper left", fontsize=8, ncol=4)
        ax.set_ylabel("seconds")
        _commit_axis(ax, rows)
    caption = f"Time of each write phase, for the last {len(rows)} pyhudi writes (stacked)."
    return Chart("phases", "Time per write phase", caption, _png(fig))


ALL: tuple[Callable[[TableFacts], Chart], ...] = (
    timeline_chart, writes_chart, file_sizes_chart, file_groups_chart, log_ratio_chart, amplification_chart,
    index_chart, phases_chart)


def draw(facts: TableFacts) -> list[Chart]:
    return [make(facts) for make in ALL]
