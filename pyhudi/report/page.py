"""``pyhudi report``: one self-contained HTML page about a table, its pictures embedded as PNG.

The page needs no server and no network: it opens from a file. It holds the advice of
:mod:`pyhudi.report.advisor`, the charts of :mod:`pyhudi.report.charts`, the table's properties,
the write options in effect and the latest instants. A few lines of script count the pictures
the browser drew (``data-charts-drawn`` on ``<body>``), which the browser test reads.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyhudi import config as C
from pyhudi.report import charts as K
from pyhudi.report.advisor import Advice, advise
from pyhudi.report.facts import TableFacts, gather
from pyhudi.table.table import HudiTable

MB = 1024 * 1024
#: options shown with their value in effect even when the writer left them at their defaults
KEY_OPTIONS = (C.INDEX_TYPE, C.PARQUET_MAX_FILE_SIZE, C.PARQUET_SMALL_FILE_LIMIT, C.BULKINSERT_PARALLELISM,
               C.CLEAN_POLICY, C.CLEAN_COMMITS_RETAINED, C.COMPACT_INLINE, C.COMPACT_INLINE_MAX_DELTA_COMMITS,
               C.CLUSTERING_INLINE, C.METADATA_ENABLE)
RECENT_INSTANTS = 30

STYLE = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1000px;
       color: #222; }
h1 { margin-bottom: 0; } .path { color: #666; margin-top: 4px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
.card b { display: block; font-size: 20px; }
figure { margin: 20px 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 20px; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.num { text-align: right; }
.advice li { margin-bottom: 8px; } .action { color: #1a5e20; font-family: monospace; overflow-wrap: anywhere; }
"""

SCRIPT = """
window.addEventListener('load', function () {
  var images = document.querySelectorAll('figure img');
  var drawn = Array.prototype.filter.call(images, function (img) { return img.complete && img.naturalWidth > 0; });
  document.body.setAttribute('data-charts', String(images.length));
  document.body.setAttribute('data-charts-drawn', String(drawn.length));
});
"""


@dataclass(frozen=True)
class Report:
    path: Path
    seconds: float
    charts: int
    advice: list[Advice]


def write_report(table: str | HudiTable, out: str | Path) -> Report:
    """Write the report of ``table`` (a path or an open table) to ``out``."""
    started = time.monotonic()
    facts = gather(table if isinstance(table, HudiTable) else HudiTable(table))
    advice = advise(facts)
    drawn = K.draw(facts)
    target = Path(out)
    target.write_text(render(facts, drawn, advice), encoding="utf-8")
    return Report(target, time.monotonic() - started, len(drawn), advice)


def render(facts: TableFacts, drawn: Sequence[K.Chart], advice: Sequence[Advice]) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(facts.name)}: pyhudi report"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>{e(facts.name)}</h1><p class='path'>{e(facts.path)} &middot; {e(facts.table_type)} &middot; "
             f"report of {dt.datetime.now():%Y-%m-%d %H:%M:%S}</p>", _cards(facts), "<h2>Advice</h2>"]
    if advice:
        parts.append("<ol class='advice'>" + "".join(
            f"<li><b>{e(a.rule)}</b>: {e(a.finding)}<br><span class='action'>&rarr; {e(a.action)}</span></li>"
            for a in advice) + "</ol>")
    else:
        parts.append("<p>Nothing in this table's history calls for a change.</p>")
    for chart in drawn:
        data = base64.b64encode(chart.png).decode("ascii")
        parts.append(f"<h2>{e(chart.title)}</h2><figure id='{e(chart.key)}'><img alt='{e(chart.title)}' "
                     f"src='data:image/png;base64,{data}'><figcaption>{e(chart.caption)}</figcaption></figure>")
    parts += ["<h2>Recent instants</h2>", _instants(facts), "<h2>Write options in effect</h2>", _options(facts),
              "<h2>Table properties</h2>",
              _table(("property", "value"), sorted(facts.properties.items())),
              f"<script>{SCRIPT}</script></body></html>"]
    return "\n".join(parts)


def _cards(facts: TableFacts) -> str:
    pending = sum(1 for i in facts.instants if i.state in ("REQUESTED", "INFLIGHT"))
    rolled = sum(1 for i in facts.instants if i.state == "ROLLED_BACK")
    cards = [("instants", len(facts.instants)), ("writes", len(facts.writes())), ("pending", pending),
             ("rolled back", rolled), ("partitions", len({s.partition for s in facts.slices})),
             ("file groups", len(facts.slices)),
             ("base files", f"{sum(s.base_bytes for s in facts.slices) / MB:,.1f} MB"),
             ("log files", f"{sum(s.log_bytes for s in facts.slices) / MB:,.1f} MB")]
    return "<div class='cards'>" + "".join(
        f"<div class='card'><b>{html.escape(str(v))}</b>{html.escape(k)}</div>" for k, v in cards) + "</div>"


def _instants(facts: TableFacts) -> str:
    rows = []
    for i in facts.instants[-RECENT_INSTANTS:][::-1]:
        seconds = i.seconds
        rows.append((i.timestamp, i.action, i.state, i.operation or "", "" if seconds is None else f"{seconds:.1f}",
                     f"{i.records_written:,}" if i.records_written else "",
                     f"{i.bytes_written / MB:,.2f}" if i.bytes_written else "",
                     str(i.files_written or ""), f"{i.amplification:.1f}" if i.amplification else ""))
    return _table(("instant", "action", "state", "operation", "seconds", "records", "MB written", "files",
                   "amplification"), rows)


def _options(facts: TableFacts) -> str:
    rows = [(k, v, "set by the latest write") for k, v in sorted(facts.options.items())]
    shown = set(facts.options)
    rows += [(o.key, str(facts.setting(o)), "default") for o in KEY_OPTIONS if o.key not in shown]
    if not facts.options:
        rows.insert(0, ("(none recorded)", "", "the latest write was not made by pyhudi, or set no option"))
    return _table(("option", "value", "source"), rows)


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
