"""The step that completes an instant, as a type the actions are handed.

An action that executes a plan (a rollback, a clean) ends by completing its instant, but what
completing means depends on whose timeline it is: on a data table the metadata table must take
its delta commit first (:class:`pyhudi.commit.point.CommitPoint`), on the metadata table itself
the instant just completes. The action takes the step as a parameter, so it neither knows nor
imports the commit point above it.
"""

from __future__ import annotations

from typing import Protocol

from pyhudi.timeline.instant import Instant
from pyhudi.timeline.timeline import Timeline


class Complete(Protocol):
    """Complete ``instant`` of ``action`` on ``timeline`` with ``content``. ``rebuild``: the
    action's own records of what it changed are lost (a rollback finished from its plan after a
    crash), so whatever is kept in step with the timeline must be rebuilt from storage."""

    def __call__(self, timeline: Timeline, instant: str, action: str, content: bytes, *,
                 rebuild: bool = False) -> Instant: ...


def complete_plainly(timeline: Timeline, instant: str, action: str, content: bytes, *,
                     rebuild: bool = False) -> Instant:
    """The completion of a timeline nothing else follows (the metadata table's own)."""
    return timeline.complete(instant, action, content)
