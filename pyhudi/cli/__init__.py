"""``pyhudi``: inspect a table's timeline, commits and file groups, like ``hudi-cli``.

    pyhudi show commits --path /data/drones
    pyhudi show commit 20240418173551906 --path /data/drones
    pyhudi show file-groups --path /data/drones [--partition 2024-01-01]
    pyhudi show timeline --path /data/drones
    pyhudi show properties --path /data/drones
    pyhudi compaction show --path /data/drones [--instant T]
    pyhudi compaction schedule --path /data/drones
    pyhudi compaction run --path /data/drones [--instant T]
    pyhudi clustering show|schedule|run --path /data/drones [--instant T]
    pyhudi clean --path /data/drones [--option hoodie.clean.commits.retained=5]
    pyhudi archive --path /data/drones [--option hoodie.keep.max.commits=40]
    pyhudi savepoint create|delete|list --path /data/drones [--instant T]
    pyhudi restore --path /data/drones --instant T
    pyhudi rollback --path /data/drones [--instant T]

Everything but ``compaction run`` and ``clustering run`` works on table metadata and files alone (no Spark).

The package: :mod:`~pyhudi.cli.main` parses the arguments and dispatches; each command family has
its module (:mod:`~pyhudi.cli.commits`, :mod:`~pyhudi.cli.timeline`, :mod:`~pyhudi.cli.metadata`,
:mod:`~pyhudi.cli.compaction`, :mod:`~pyhudi.cli.clustering`, :mod:`~pyhudi.cli.services`), and
:mod:`~pyhudi.cli.common` holds what they share. The CLI stands above every other layer but the
demo: it may import any of them; nothing but the demo imports it.
"""

from pyhudi.cli.main import main

__all__ = ["main"]

