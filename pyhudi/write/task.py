"""Which Spark task is writing: the identity that goes into write tokens and sequence numbers.

Hudi names every file it writes with a token ``partitionId-stageId-attemptId`` and numbers records
``instant_partitionId_position``, so two attempts of one task never write the same file name. The
write layer must not import pyspark, so it does not ask Spark: the Spark layer
(``pyhudi.spark.worker.map_in_arrow``, which every ``mapInArrow`` of pyhudi goes through) reads
the task context in the executor and runs the body inside :func:`running_task`. Code run outside
a Spark task (unit tests, the driver) sees task 0-0-0, as before.

A Python worker runs one task at a time, so one module-level value is enough.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyhudi.io.file_names import write_token

__all__ = ["NO_TASK", "TaskInfo", "current_task", "running_task"]


@dataclass(frozen=True)
class TaskInfo:
    """A Spark task's partition, stage and attempt ids."""

    partition_id: int
    stage_id: int
    attempt_id: int

    @property
    def token(self) -> str:
        """The write token Hudi puts in file names: ``partition-stage-attempt``."""
        return write_token(self.partition_id, self.stage_id, self.attempt_id)


#: the identity of code that runs outside any Spark task
NO_TASK = TaskInfo(0, 0, 0)
_current = NO_TASK


def current_task() -> TaskInfo:
    """The Spark task running this code (0-0-0 outside Spark, e.g. in unit tests)."""
    return _current


@contextmanager
def running_task(task: TaskInfo) -> Iterator[None]:
    """Within the block, :func:`current_task` is ``task``; afterwards it is what it was before."""
    global _current
    previous, _current = _current, task
    try:
        yield
    finally:
        _current = previous
