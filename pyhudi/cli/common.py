"""What every ``pyhudi`` sub-command shares: tables of text, byte sizes, ``--option KEY=VALUE``.

Kept apart from the command modules so each of them can import it without importing the others.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence

from pyhudi.errors import HudiConfigError

#: the options the writers' lock and heartbeats need, which services touching the timeline share
LOCK_EXAMPLE = "hoodie.write.lock.provider=...InProcessLockProvider"


def human(n: float) -> str:
    """A byte count as ``12.3 MB``."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as a boxed text table, numbers right-aligned, as ``hudi-cli`` prints them."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths)) + " |", line]
    for r in cells[1:]:
        out.append("| " + " | ".join(c.rjust(w) if c.replace(".", "").replace(" ", "").isalnum()
                                      and c[:1].isdigit() else c.ljust(w) for c, w in zip(r, widths)) + " |")
    out.append(line)
    return "\n".join(out)


def option_arg(p: argparse.ArgumentParser, *, example: str = "hoodie.clean.commits.retained=5") -> None:
    """The repeatable ``--option KEY=VALUE`` argument of commands that take ``hoodie.*`` options."""
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help=f"a hoodie.* option, e.g. {example}")


def add_plan_commands(sub: argparse._SubParsersAction, name: str, helptext: str,
                      actions: Sequence[tuple[str, str]], *, example: str) -> None:
    """A table service's ``show|schedule|run`` sub-commands (compaction, clustering): each takes
    ``--path`` and ``--option``; all but ``schedule`` take ``--instant``."""
    service = sub.add_parser(name, help=helptext)
    action = service.add_subparsers(dest="what", required=True)
    for what, what_help in actions:
        p = action.add_parser(what, help=what_help)
        p.add_argument("--path", required=True, help="table base path")
        if what != "schedule":
            p.add_argument("--instant", default=None)
        option_arg(p, example=example)


def pairs(items: list[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict."""
    options = {}
    for item in items:
        if "=" not in item:
            raise HudiConfigError(f"{flag} takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        options[key.strip()] = value.strip()
    return options


def options_of(args: argparse.Namespace) -> dict[str, str]:
    """The ``--option`` arguments as a dict (none when the command takes none), with the store
    settings of ``--storage-option`` so the Spark jobs a command runs reach the same store."""
    return {**pairs(getattr(args, "storage_option", []), "--storage-option"),
            **pairs(getattr(args, "option", []), "--option")}


def epoch_text(millis: int) -> str:
    """Milliseconds since the epoch as local ``yyyy-mm-dd HH:MM:SS`` (``-`` for 0)."""
    return dt.datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S") if millis else "-"
