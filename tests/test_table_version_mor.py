"""Merge-on-read tables Apache Hudi wrote (shared/interop/mor) change version as Hudi changes them:
compacted first (the version change refuses log files in the latest slices, since versions 6 and 8
name and slice log files differently), then 6 -> 9 -> 6, reading the same through hudi-rs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from conftest import hudi_rs_rows, unzip_table

import pyhudi
from pyhudi.errors import HudiUnsupportedError

TABLES = ["avro/v6_trips_8i1u", "avro/v6_trips_8i3d", "parquet/v6_nonpartitioned",
          "parquet/v6_simplekeygen_nonhivestyle"]


def _plain(value: Any) -> Any:
    """A value as both readers give it: hudi-rs's maps are lists of pairs and its timestamps carry
    UTC, Spark's maps are dicts and its timestamps are naive UTC (and PySpark 3.5's binaries are
    bytearrays)."""
    if isinstance(value, bytearray):  # PySpark 3.5's binary values
        return bytes(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _key(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, repr(_plain(v))) for k, v in r.items() if not k.startswith("_hoodie_")))
                  for r in rows)


def _rows(path) -> list[tuple]:
    return _key(hudi_rs_rows(path))


@pytest.mark.parametrize("name", TABLES)
def test_a_compacted_interop_mor_table_moves_to_9_and_back(spark, interop_dir, tmp_path, name):
    path = unzip_table(interop_dir / "mor" / f"{name}.zip", tmp_path)
    before = _rows(path)
    assert before
    with pytest.raises(HudiUnsupportedError, match="Compact the table first"):
        pyhudi.upgrade(str(path), to=9)
    assert pyhudi.compact(spark, str(path), {"hoodie.compact.inline.max.delta.commits": "1"})
    assert _rows(path) == before
    pyhudi.upgrade(str(path), to=9)
    assert pyhudi.HudiTable(str(path)).config.version == 9
    assert _rows(path) == before
    assert _key([r.asDict(recursive=True) for r in pyhudi.read(spark, str(path)).collect()]) == before
    pyhudi.downgrade(str(path), to=6)
    assert _rows(path) == before
