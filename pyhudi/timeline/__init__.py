"""The timeline: instants, their states and actions, and the metadata each one records."""

from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import Instant, State, new_instant_time
from pyhudi.timeline.timeline import Timeline

__all__ = ["CommitMetadata", "Instant", "State", "Timeline", "WriteStat", "new_instant_time"]
