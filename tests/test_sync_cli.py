"""``pyhudi sync`` on tables Apache Hudi wrote, to the suite's Hive metastore: the first run
registers the table and its partitions, a second changes nothing, an unreachable catalog exits 2
naming it."""

from __future__ import annotations

import re

from conftest import unzip_table

from pyhudi.cli import main
from pyhudi.sync.hms import HiveMetastoreClient


def test_cli_sync_registers_and_is_idempotent(interop_dir, tmp_path, hms_server, capsys):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_hivestyle_no_metafields.zip", tmp_path)
    args = ["sync", "--path", str(path), "--catalog", "hms", "--database", "cli",
            "--metastore-uris", hms_server.uri, "--table", "people"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "cli.people" in first and "ok" in first
    client = HiveMetastoreClient(hms_server.uri)
    table = client.get_table("cli", "people")
    assert table is not None and table.parameters["last_commit_time_sync"]
    assert set(client.get_partitions(table)) == {("10",), ("20",), ("30",)}
    assert main([*args, "--full"]) == 0  # a full comparison finds nothing to change
    again = capsys.readouterr().out
    assert re.search(r"\| -\s+\|\s+0 \|\s+0 \|\s+0 \| no\s+\|", again), again  # created -, nothing changed
    assert set(client.get_partitions(client.get_table("cli", "people"))) == {("10",), ("20",), ("30",)}
    assert main(["sync", "--path", str(path), "--catalog", "hms", "--metastore-uris", "thrift://127.0.0.1:9"]) == 2
    assert "thrift://127.0.0.1:9" in capsys.readouterr().err
