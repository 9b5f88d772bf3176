"""Throughput of MOR log data blocks: encode/decode rows/s for Avro and parquet blocks.

100k rows of a 10-column flat schema (five meta strings, key string, ts long, double, string,
bool), the shape of an update batch an executor writes. Run: ``.venv/bin/python benchmarks/log_format.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from pyhudi.io.avro_codec import encode_fastavro, load_schema
from pyhudi.io.avro_schema import table_avro_schema
from pyhudi.io.log_format import (
    avro_data_block,
    data_block_records,
    parquet_data_block,
    read_blocks,
)

INSTANT = "20250101000000000"


def make_rows(n: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = [f"key-{i:09d}-{rng.integers(1 << 40):x}" for i in range(n)]
    return pa.table({
        "_hoodie_commit_time": pa.array([INSTANT] * n),
        "_hoodie_commit_seqno": pa.array([f"{INSTANT}_0_{i}" for i in range(n)]),
        "_hoodie_record_key": pa.array(keys),
        "_hoodie_partition_path": pa.array([f"city={c}" for c in rng.choice(["sf", "sao_paulo", "chennai"], n)]),
        "_hoodie_file_name": pa.array(["6d3d1d6e-2298-4080-a0c1-494877d6f40a-0"] * n),
        "key": pa.array(keys),
        "ts": pa.array(rng.integers(1_600_000_000_000, 1_800_000_000_000, n)),
        "fare": pa.array(rng.random(n) * 100),
        "rider": pa.array([f"rider-{x}" for x in rng.integers(0, 1000, n)]),
        "active": pa.array(rng.random(n) < 0.5),
    })


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--fastavro", action="store_true", help="also time the per-row fastavro encoder")
    args = parser.parse_args()
    rows = make_rows(args.rows)
    schema = table_avro_schema(rows.schema, "bench", with_meta_fields=True)
    n = rows.num_rows
    print(f"{n} rows, 10 columns")
    for name, encode in [("avro", lambda: avro_data_block(rows, schema, INSTANT)),
                         ("parquet", lambda: parquet_data_block(rows, schema, INSTANT))]:
        t_enc, data = timed(encode)
        assert isinstance(data, bytes)
        block = read_blocks(data, source=name)[0]
        t_dec, table = timed(lambda b=block: data_block_records(b))
        assert isinstance(table, pa.Table) and table.num_rows == n
        print(f"{name:8s} encode {n / t_enc:12,.0f} rows/s ({t_enc * 1e3:7.1f} ms)   "
              f"decode {n / t_dec:12,.0f} rows/s ({t_dec * 1e3:7.1f} ms)   block {len(data) / 1e6:6.2f} MB")
    if args.fastavro:
        t_fa, _ = timed(lambda: encode_fastavro(rows, load_schema(schema), length_prefix=True), repeat=1)
        print(f"fastavro per-row encode (reference) {n / t_fa:12,.0f} rows/s ({t_fa * 1e3:7.1f} ms)")


if __name__ == "__main__":
    main()
