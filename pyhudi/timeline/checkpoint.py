"""Streaming checkpoints in commit metadata: which micro-batch a commit wrote.

A streaming writer stores ``{"<identifier>": "<batch id>"}`` (JSON) under
``_hudi_streaming_sink_checkpoint`` in the extra metadata of every commit it makes, as Apache
Hudi's streaming sink does. After a failure Spark replays the batches its own checkpoint does not
mark done; the writer looks up the last batch id the table committed for its identifier and skips
any batch at or below it, so a replayed batch is never written twice. The identifier
(``hoodie.datasource.write.streaming.checkpoint.identifier``) keeps two streaming writers of one
table from skipping each other's batches.
"""

from __future__ import annotations

import json

from pyhudi.errors import HudiCorruptFileError
from pyhudi.timeline.timeline import Timeline

#: the extra-metadata key of Hudi's streaming sink
SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"


def checkpoint_value(identifier: str, batch_id: int) -> str:
    """The value a commit of micro-batch ``batch_id`` records under :data:`SINK_CHECKPOINT_KEY`."""
    return json.dumps({identifier: str(batch_id)})


def last_batch_id(timeline: Timeline, identifier: str) -> int | None:
    """The batch id of the newest completed write that recorded one for ``identifier``.

    Newest first, as Hudi reads it: commits of other identifiers and commits without a checkpoint
    (a batch job, a compaction) are passed over.
    """
    for instant in reversed(timeline.completed_writes()):
        value = timeline.commit_metadata(instant).extra_metadata.get(SINK_CHECKPOINT_KEY)
        if not value:
            continue
        try:
            recorded = json.loads(value)
            if identifier in recorded:
                return int(recorded[identifier])
        except (ValueError, TypeError, AttributeError) as exc:
            raise HudiCorruptFileError(
                f"commit {instant.timestamp} has an unreadable {SINK_CHECKPOINT_KEY}: {value!r}") from exc
    return None
