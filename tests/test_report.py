"""pyhudi report and pyhudi advise: figures checked against the commit metadata they come from, the
page drawn by a real browser, and each advice rule on a table built to trigger it and one built not to."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.report import charts
from pyhudi.report.advisor import advise
from pyhudi.report.facts import gather
from pyhudi.report.page import write_report
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.write.result import OPTIONS_KEY, PHASES_KEY, record_run

SCHEMA = "key string, part string, ts long, payload string"


def options(**extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            **extra}


def write(spark, path: str, rows: list[tuple], opts: dict, operation: str = "upsert") -> str:
    df = spark.createDataFrame(rows, SCHEMA)
    return pyhudi.write(df, path, {**opts, "hoodie.datasource.write.operation": operation}).instant_time


def read_back(spark, path: str) -> None:
    """The table reads the same through pyhudi and the independent hudi-rs reader."""
    ours = sorted((r["key"], r["ts"], r["payload"]) for r in pyhudi.read(spark, path).collect())
    assert ours == sorted((r["key"], r["ts"], r["payload"]) for r in hudi_rs_rows(path))


def rows(keys, ts: int = 1, part: str = "p0") -> list[tuple]:
    """Rows with a JSON payload that compresses little (so files are cut where their size says)."""
    return [(k, part, ts, json.dumps({"k": k, "ts": ts, "pad": uuid.uuid5(uuid.NAMESPACE_OID, f"{k}{ts}").hex}))
            for k in keys]


def test_figures_come_from_the_commit_metadata(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.index.type": "BLOOM", "hoodie.clean.commits.retained": "1",
                      "hoodie.bulkinsert.shuffle.parallelism": "2"})
    write(spark, path, rows(f"k{i:04d}" for i in range(200)), opts, "bulk_insert")
    write(spark, path, rows([f"k{i:04d}" for i in range(20)] + [f"n{i}" for i in range(10)], ts=2), opts)
    doomed = write(spark, path, rows(["k0001"], ts=3), opts)
    pyhudi.rollback(path, doomed)
    write(spark, path, rows(["k0002"], ts=4), opts)
    read_back(spark, path)
    table = pyhudi.HudiTable(path)
    facts = gather(table)
    by_time = {i.timestamp: i for i in facts.instants}
    writes = table.timeline.completed_writes()
    assert [w.timestamp for w in facts.writes()] == [w.timestamp for w in writes]
    for inst in writes:
        meta, got = table.timeline.commit_metadata(inst), by_time[inst.timestamp]
        stats = meta.write_stats()
        assert (got.records_written, got.inserts, got.updates, got.bytes_written, got.files_written) == (
            meta.total("numWrites"), meta.total("numInserts"), meta.total("numUpdateWrites"),
            meta.total("totalWriteBytes"), len(stats))
        incoming = sum((s.numInserts + s.numUpdateWrites) * s.totalWriteBytes / s.numWrites for s in stats)
        assert got.amplification == pytest.approx(meta.total("totalWriteBytes") / incoming)
        assert got.phases and "write" in got.phases and got.seconds is not None and got.seconds >= 0
        assert got.options["hoodie.index.type"] == "BLOOM"
        if got.operation == "UPSERT":
            assert got.index is not None and got.index["index_type"] == "BLOOM"
    upsert = by_time[writes[1].timestamp]
    assert (upsert.updates, upsert.inserts) == (20, 10) and upsert.amplification > 1
    assert by_time[writes[0].timestamp].amplification == pytest.approx(1.0)
    assert by_time[doomed].state == "ROLLED_BACK"
    assert [i.undone for i in facts.instants if i.action == "rollback"] == [(doomed,)]
    assert any(i.action == "clean" for i in facts.instants)
    assert len(facts.slices) == len(table.file_system_view().latest_slices())
    assert sum(s.base_bytes for s in facts.slices) == sum(
        b.size for b in table.file_system_view().latest_base_files())
    drawn = charts.draw(facts)
    assert [c.key for c in drawn] == ["timeline", "writes", "file_sizes", "file_groups", "log_ratio",
                                      "amplification", "index", "phases"]
    assert all(c.png.startswith(b"\x89PNG") for c in drawn)
    assert "1 rolled back" in drawn[0].caption
    report = write_report(path, tmp_path / "report.html")
    page = report.path.read_text()
    assert page.count("data:image/png;base64,") == 8 and "hoodie.table.recordkey.fields" in page
    assert doomed in page and "ROLLED_BACK" in page


def test_recorded_options_leave_secrets_out():
    meta = CommitMetadata()
    record_run(meta, {"write_s": 1.5, "tasks": 4, "plan_s": 0.25},
               {"hoodie.index.type": "BLOOM", "hoodie.aws.secret.key": "s3cr3t", "path": "/x",
                "hoodie.write.lock.zookeeper.password": "pw"})
    assert json.loads(meta.extra_metadata[PHASES_KEY]) == {"write": 1.5, "plan": 0.25}
    assert json.loads(meta.extra_metadata[OPTIONS_KEY]) == {"hoodie.index.type": "BLOOM"}


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="Chromium is not installed")
def test_the_page_draws_every_chart_in_a_browser(spark, tmp_path):
    """Headless Chromium (Debian's package; .ci/run installs it) opens the report from its file: every
    picture decodes and draws, the page logs nothing to the console, and the screenshot is not blank."""
    assert CHROMIUM is not None, "CI must have Chromium: apt-get install chromium"
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.index.type": "BLOOM"})
    write(spark, path, rows(f"k{i}" for i in range(50)), opts)
    write(spark, path, rows((f"k{i}" for i in range(10)), ts=2), opts)  # log files
    read_back(spark, path)
    page = write_report(path, tmp_path / "report.html").path
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
             "--virtual-time-budget=5000"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None, dom.stderr[-2000:]
    assert 'data-charts="8"' in body.group(0) and 'data-charts-drawn="8"' in body.group(0), body.group(0)
    shot = tmp_path / "report.png"
    run = subprocess.run([*flags, "--window-size=1100,5200", f"--screenshot={shot}", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    console = [line for line in (dom.stderr + run.stderr).splitlines() if ":CONSOLE" in line]
    assert not console, console
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 5200 and pixels.std() > 0.05, "the screenshot shows the page"


# -- advice: each rule on a table that shows the problem, and on one that does not ------------------
def index_table(spark, path: str, random_keys: bool) -> None:
    """Five batches of new keys, each in a file of its own, then upserts. Random keys give every
    file a key range covering nearly every key, so range pruning keeps them all; keys that grow
    with time give each file its own range, so pruning keeps one."""
    opts = options(**{"hoodie.index.type": "BLOOM", "hoodie.parquet.small.file.limit": "0"})
    batches = [[str(uuid.uuid5(uuid.NAMESPACE_OID, f"{b}-{i}")) if random_keys else f"k{b}-{i:04d}"
                for i in range(200)] for b in range(5)]
    for n, batch in enumerate(batches):
        write(spark, path, rows(batch, ts=n), opts, "insert")
    for n in range(3):
        write(spark, path, rows(batches[n][:5], ts=10 + n), opts)


def small_file_limit_table(spark, path: str, limit_zero: bool) -> None:
    opts = options(**{"hoodie.parquet.small.file.limit": "0" if limit_zero else "104857600"})
    for n in range(6):
        write(spark, path, rows((f"b{n}-{i}" for i in range(20)), ts=n), opts, "insert")


def insert_amplification_table(spark, path: str, tiny_batches: bool) -> None:
    """Inserts into one file: one-row batches rewrite the whole file each time."""
    opts = options()
    write(spark, path, rows(f"k{i:05d}" for i in range(3000)), opts, "bulk_insert")
    for n in range(3):
        batch = [f"n{n}"] if tiny_batches else [f"n{n}-{i}" for i in range(3000)]
        write(spark, path, rows(batch, ts=n + 2), opts, "insert")


def load_table(spark, path: str, small_files: bool) -> None:
    """A load cut into many small files of one partition (it ran with a tiny target file size),
    then a write with the usual target; or the same rows in one file."""
    opts = options(**{"hoodie.parquet.max.file.size": "10000" if small_files else "125829120"})
    write(spark, path, rows(f"k{i:05d}" for i in range(20000)), opts, "bulk_insert")
    write(spark, path, rows(["k00001"], ts=2), options())


def compaction_table(spark, path: str, heavy_logs: bool) -> None:
    """Merge-on-read: the same keys updated until their log files outweigh the base file."""
    opts = options(**{"hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.index.type": "BLOOM"})
    keys = [f"k{i:04d}" for i in range(300)]
    write(spark, path, rows(keys), opts, "bulk_insert")
    for n in range(9):
        write(spark, path, rows(keys, ts=2 + n), opts)
    if not heavy_logs:
        pyhudi.compact(spark, path)


def retention_table(spark, path: str, by_commits: bool) -> None:
    """Writes seconds apart with the cleaner keeping two commits: a reader 10 s behind loses files
    (kept by hours instead, the window is a day)."""
    policy = {"hoodie.clean.commits.retained": "2"} if by_commits else {"hoodie.clean.policy": "KEEP_LATEST_BY_HOURS"}
    opts = options(**policy)
    for n in range(5):
        write(spark, path, rows(["k1", f"n{n}"], ts=n), opts)


def test_many_small_files_of_a_bucket_table_are_not_advised_against(spark, tmp_path):
    """A BUCKET table's files are its buckets: neither clustering nor a load's parallelism is advice."""
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "12"})
    write(spark, path, rows(f"k{i:04d}" for i in range(600)), opts, "bulk_insert")
    write(spark, path, rows(["k0001"], ts=2), opts)
    read_back(spark, path)
    facts = gather(pyhudi.HudiTable(path))
    assert sum(1 for s in facts.slices if s.base_bytes) == 12
    assert not {a.rule for a in advise(facts)} & {"clustering", "bulk-insert-parallelism"}
    with pytest.raises(pyhudi.HudiUnsupportedError, match="BUCKET"):  # known from the writes' recorded options
        pyhudi.schedule_clustering(path)


RULES: dict[str, tuple[Callable, str]] = {
    "index": (index_table, "hoodie.index.type=RECORD_INDEX"),
    "small-file-limit": (small_file_limit_table, "hoodie.parquet.small.file.limit=104857600"),
    "insert-amplification": (insert_amplification_table, "hoodie.parquet.small.file.limit=26214400"),
    "clustering": (load_table, "pyhudi clustering run"),
    "bulk-insert-parallelism": (load_table, "hoodie.parquet.max.file.size=10000"),
    "compaction": (compaction_table, "pyhudi compaction run"),
    "retention": (retention_table, "hoodie.clean.commits.retained="),
}


@pytest.mark.parametrize("case", sorted(RULES))
def test_each_rule_speaks_on_the_table_that_shows_the_problem_only(spark, tmp_path, case):
    build, action = RULES[case]
    rule = "small-file-limit" if case == "insert-amplification" else case
    found = {}
    for shows in (True, False):
        path = str(tmp_path / f"t{shows}")
        build(spark, path, shows)
        read_back(spark, path)
        advice = {a.rule: a for a in advise(gather(pyhudi.HudiTable(path)))}
        found[shows] = advice
    assert rule in found[True], found[True]
    assert action in found[True][rule].action, found[True][rule]
    assert re.search(r"\d", found[True][rule].finding), "the finding names its figures"
    assert rule not in found[False], found[False][rule] if rule in found[False] else None
    out = subprocess.run([sys.executable, "-m", "pyhudi.cli", "advise", "--path", str(tmp_path / "tTrue")],
                         capture_output=True, text=True)
    assert f"[{rule}]" in out.stdout, out.stdout + out.stderr
