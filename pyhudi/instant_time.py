"""Instant times as text: the 17-digit ``yyyyMMddHHmmssSSS`` strings that name Hudi instants.

These functions only convert between text and datetimes; they know nothing of timelines. They
live at the bottom of the package, beside ``errors``, because the option parsers in
``pyhudi.config`` (which stand below the timeline) must read instants named in query options, and
the timeline, archive, reads and reports must format and parse the same strings. This module
imports nothing from pyhudi.
"""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["INSTANT_FORMAT", "format_instant", "parse_instant_time", "parse_query_instant"]

#: strftime form of the first 14 digits; the last three are milliseconds
INSTANT_FORMAT = "%Y%m%d%H%M%S"


def format_instant(moment: dt.datetime) -> str:
    """A datetime as a 17-digit instant time (millisecond precision, as Hudi writes them)."""
    return moment.strftime(INSTANT_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant_time(ts: str) -> dt.datetime:
    """An instant time as a naive datetime (14-digit legacy times too)."""
    if len(ts) == 14:
        return dt.datetime.strptime(ts, INSTANT_FORMAT)
    return dt.datetime.strptime(ts[:14], INSTANT_FORMAT) + dt.timedelta(milliseconds=int(ts[14:17]))


_QUERY_FORMS = (
    (re.compile(r"^\d{17}$"), lambda d: d),
    (re.compile(r"^\d{14}$"), lambda d: d + "000"),
    (re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}\.\d{3}$"), lambda d: d),
    (re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}$"), lambda d: d + "999"),
    (re.compile(r"^\d{4}-\d{2}-\d{2}$"), lambda d: d + "000000000"),
)


def parse_query_instant(value: object) -> str:
    """An instant named in a query option, as a 17-digit instant time.

    Accepts what Hudi's ``formatQueryInstant`` accepts: ``yyyyMMddHHmmss[SSS]``,
    ``yyyy-MM-dd HH:mm:ss[.SSS]`` (also with ``T``) and ``yyyy-MM-dd`` (midnight, so a date reads
    the table as it was when that day began). As in Hudi, ``HH:mm:ss`` covers the whole second
    (``.999``); a 14-digit instant means its first millisecond (``000``).
    """
    text = str(value).strip()
    for pattern, complete in _QUERY_FORMS:
        if pattern.match(text):
            digits = complete("".join(ch for ch in text if ch.isdigit()))
            try:
                parse_instant_time(digits)
            except ValueError:
                break
            return digits
    raise ValueError(f"cannot read {value!r} as an instant; use yyyyMMddHHmmss[SSS], "
                     "'yyyy-MM-dd HH:mm:ss[.SSS]' or 'yyyy-MM-dd'")
