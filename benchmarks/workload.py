"""The drone telemetry rows every benchmark system writes: realistic, made column-wise with pyarrow.

200 drones report once a minute. A row has 12 columns: ``key`` (``yyyyMMddHHmm_droneID``, the
record key), ``drone_id``, ``ts`` (epoch ms, the precombine field), ``day`` (``yyyy-MM-dd``, the
partition), ``lat``, ``lon``, ``altitude``, ``speed``, ``battery`` (doubles), ``status`` (6 values) and
``payload``, a JSON string of about 110 bytes (firmware, sequence number, rssi, satellites,
temperature, flight mode, crc). A daily batch holds the new day and corrections to every tenth
minute of the day before (same keys, larger ``ts``, new values).

Users hand these rows to Spark the way they have them: ``spark.createDataFrame(pandas_df)`` (with
Arrow, one Spark partition per 10,000 rows) is what :func:`pandas_frame` builds.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
STATUS = ["ok", "low_battery", "returning", "charging", "maintenance", "lost_link"]
MODES = ["auto", "manual", "hold", "rtl"]


def _text(values: np.ndarray) -> pa.Array:
    return pa.array(values).cast(pa.string())


def rows(first_day: int, days: int, drones: int, *, revision: int = 0, every_nth_minute: int = 1) -> pa.Table:
    """One reading per drone per minute for ``days`` days from day ``first_day``; ``revision`` > 0
    makes corrections (same keys, ``ts`` larger by ``revision`` ms, other values)."""
    per_day = 1440 * drones
    ids = np.arange(first_day * per_day, (first_day + days) * per_day, dtype=np.int64)
    minute = ids // drones
    if every_nth_minute > 1:
        keep = minute % every_nth_minute == 0
        ids, minute = ids[keep], minute[keep]
    drone = ids % drones
    start_s = int(START.timestamp())
    # format each minute once, then spread it over the drones
    minutes = np.arange(minute[0], minute[-1] + 1) if len(minute) else np.zeros(0, dtype=np.int64)
    stamps = pa.array((start_s + minutes * 60) * 1_000_000, pa.timestamp("us", tz="UTC"))
    at = pa.array(minute - (minute[0] if len(minute) else 0))
    drone_text = pc.utf8_lpad(_text(drone), 3, "0")
    seed = ids * 7919 + revision * 104729
    rng = np.random.default_rng(first_day * 1_000_003 + revision * 7 + len(ids))
    n = len(ids)
    payload = pc.binary_join_element_wise(
        '{"firmware":"v2.', _text(drone % 7), ".", _text(revision + drone % 3),
        '","sequence":', _text(minute % 1440), ',"rssi":-', _text(40 + seed % 60),
        ',"satellites":', _text(6 + seed % 12), ',"temp_c":', _text(15 + seed % 20), ".", _text(seed % 10),
        ',"mode":"', pa.array(MODES).take(pa.array(seed % 4)), '","crc":"0x',
        pc.utf8_lpad(_text(seed % 65536), 5, "0"), '"}', "")
    return pa.table({
        "key": pc.binary_join_element_wise(pc.strftime(stamps, format="%Y%m%d%H%M").take(at), drone_text, "_"),
        "drone_id": pc.binary_join_element_wise(pa.scalar("drone-"), drone_text, ""),
        "ts": (start_s + minute * 60) * 1000 + revision,
        "day": pc.strftime(stamps, format="%Y-%m-%d").take(at),
        "lat": 37.0 + (seed % 10000) / 100000.0,
        "lon": -122.0 - (seed % 7777) / 100000.0,
        "altitude": 100.0 + (seed % 500) + rng.random(n),
        "speed": rng.random(n) * 25,
        "battery": 100.0 - (minute % 1440) / 15.0,
        "status": pa.array(STATUS).take(pa.array((seed // 7) % 6)),
        "payload": payload,
    })


def daily_batch(day: int, drones: int, *, update_every: int = 10) -> pa.Table:
    """Day ``day``'s readings plus corrections to every ``update_every``-th minute of the day before."""
    return pa.concat_tables([rows(day, 1, drones),
                             rows(day - 1, 1, drones, revision=day, every_nth_minute=update_every)])


def day_name(day: int) -> str:
    return (START + dt.timedelta(days=day)).strftime("%Y-%m-%d")


def pandas_frame(spark, table: pa.Table):  # type: ignore[no-untyped-def]
    """``spark.createDataFrame`` of the rows as pandas holds them (strings as Python objects, as
    pandas 2 does; PySpark 3.5's Arrow path cannot take pandas 3's Arrow-backed strings)."""
    frame = table.to_pandas()
    for name in frame.columns:
        if str(frame[name].dtype) in ("str", "string"):
            frame[name] = frame[name].astype(object)
    return spark.createDataFrame(frame)
