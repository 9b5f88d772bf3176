"""Apache Hudi 1.1's storage-based lock on moto's S3 server and on local paths: its file as Hudi
writes it, exclusion of Hudi's writers and of other processes, leases on the store's clock, and
writers in two processes on one s3a:// table losing nothing."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import pyhudi
from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError, HudiLockError, HudiUnsupportedError
from pyhudi.storage import Storage, resolve_options, s3
from pyhudi.table.table import HudiTable
from pyhudi.transaction.conflict import CONFLICT_CHECK_KEY
from pyhudi.transaction.lock import (
    FileSystemLockProvider,
    InProcessLockProvider,
    StorageBasedLockProvider,
    TableLock,
)
from pyhudi.transaction.storage_lock import LOCK_FILE

WRITER = str(Path(__file__).parent / "writer_process.py")
KEY = LOCK_FILE.split("/", 1)[1]
FAST = {"hoodie.write.lock.wait_time_ms": "300", "hoodie.write.lock.client.num_retries": "0"}
SHORT_LEASE = {"hoodie.write.lock.storage.validity.timeout.secs": "10",
               "hoodie.write.lock.storage.renew.interval.secs": "1"}
BASE = {"hoodie.table.name": "c", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}
OCC = {**BASE, "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
STORAGE_BASED = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"


def _storage(server, bucket: str, table: str = "t") -> Storage:
    uri = f"s3a://{bucket}/{table}"
    return Storage(uri, resolve_options(uri, server.storage_options))


def _store_now_ms(server, bucket: str) -> int:
    return s3.store_time_ms(resolve_options("s3://b", server.storage_options), bucket)


def _lock_file(server, bucket: str, table: str = "t") -> tuple[bytes, str]:
    obj = server.client().get_object(Bucket=bucket, Key=f"{table}/{LOCK_FILE}")
    return obj["Body"].read(), obj["ETag"]


def _hudi_lock(expired: bool, valid_until: int, owner: str) -> bytes:
    """The bytes Hudi 1.1's Jackson mapper writes for StorageLockData."""
    return (f'{{"expired":{"true" if expired else "false"},"validUntil":{valid_until},'
            f'"owner":"{owner}"}}').encode()


@pytest.fixture(scope="module")
def s3_table(spark, s3_server) -> str:
    """A small table on S3 for the tests that need one and leave its data alone."""
    path = f"s3a://{s3_server.make_bucket(f'pyhudi-lock-table-{uuid.uuid4().hex[:8]}')}/t"
    pyhudi.write(spark.createDataFrame([("a", "p0", 1, "x")], "id string, p string, ts long, val string"), path,
                 {**BASE, **s3_server.hadoop_conf})
    return path


@pytest.fixture(params=["s3", "local"])
def lock_storage(request, tmp_path):
    """The table storage of a lock test: a fresh S3 bucket, or a local folder."""
    if request.param == "local":
        return Storage(str(tmp_path / "t"))
    server = request.getfixturevalue("s3_server")
    return _storage(server, request.getfixturevalue("s3_bucket"))


# -- the file, and Hudi's writers ------------------------------------------------------------------
def test_lock_file_written_by_hudi_excludes_pyhudi_until_released(s3_server, s3_bucket):
    """A writer of Apache Hudi 1.1 creates the file (If-None-Match) and releases it (If-Match):
    pyhudi waits for it, then writes the same format, which a Hudi writer would refuse to take."""
    client, key = s3_server.client(), f"t/{LOCK_FILE}"
    hudi_owner = str(uuid.uuid4())
    valid_until = _store_now_ms(s3_server, s3_bucket) + 60_000
    etag = client.put_object(Bucket=s3_bucket, Key=key, Body=_hudi_lock(False, valid_until, hudi_owner),
                             IfNoneMatch="*")["ETag"]
    storage = _storage(s3_server, s3_bucket)
    with pytest.raises(HudiLockError, match=hudi_owner + r".*lease runs [56]\d s more"):
        TableLock(storage, HudiConfig(FAST)).acquire()
    client.put_object(Bucket=s3_bucket, Key=key, Body=_hudi_lock(True, valid_until, hudi_owner), IfMatch=etag)

    lock = TableLock(storage, HudiConfig(FAST))
    mark = s3_server.mark()
    lock.acquire()
    taking = s3_server.requests_since(mark, s3_bucket)
    body, etag = _lock_file(s3_server, s3_bucket)
    doc = json.loads(body)
    assert list(doc) == ["expired", "validUntil", "owner"]
    assert body == _hudi_lock(False, doc["validUntil"], doc["owner"])  # compact, no newline
    assert str(uuid.UUID(doc["owner"])) == doc["owner"] != hudi_owner
    assert abs(doc["validUntil"] - (_store_now_ms(s3_server, s3_bucket) + 300_000)) < 3000
    # Hudi's tryLock: the lease is live by its clock; its conditional writes are refused
    assert not doc["expired"] and time.time() * 1000 <= doc["validUntil"] + 500
    stale = etag[:1] + ("0" if etag[1] != "0" else "1") + etag[2:]  # another ETag ('"<hex>"', first digit changed)
    for condition in ({"IfNoneMatch": "*"}, {"IfMatch": stale}):
        with pytest.raises(client.exceptions.ClientError, match="PreconditionFailed"):
            client.put_object(Bucket=s3_bucket, Key=key, Body=_hudi_lock(False, 1, hudi_owner), **condition)
    mark = s3_server.mark()
    lock.release()
    assert taking["PUT"] == 1 and s3_server.requests_since(mark, s3_bucket) == {"PUT": 1}
    assert _lock_file(s3_server, s3_bucket)[0] == _hudi_lock(True, doc["validUntil"], doc["owner"])


def test_foreign_content_is_an_error_naming_the_file(s3_server, s3_bucket):
    s3_server.client().put_object(Bucket=s3_bucket, Key=f"t/{LOCK_FILE}", Body=b'{"expired":false}')
    with pytest.raises(HudiLockError, match=r"table_lock\.json is not Hudi's storage lock"):
        TableLock(_storage(s3_server, s3_bucket), HudiConfig(FAST)).acquire()


def test_expiry_is_judged_on_the_store_clock(s3_server, s3_bucket, monkeypatch):
    """This machine's clock an hour off either way changes nothing: leases are stamped and judged
    by the store's clock."""
    client, key = s3_server.client(), f"t/{LOCK_FILE}"
    storage = _storage(s3_server, s3_bucket)
    real = time.time
    now = _store_now_ms(s3_server, s3_bucket)
    client.put_object(Bucket=s3_bucket, Key=key, Body=_hudi_lock(False, now + 20_000, "live-elsewhere"))
    monkeypatch.setattr(time, "time", lambda: real() + 3600)  # ahead: the live lease would look lapsed
    with pytest.raises(HudiLockError, match="live-elsewhere"):
        TableLock(storage, HudiConfig(FAST)).acquire()
    client.put_object(Bucket=s3_bucket, Key=key, Body=_hudi_lock(False, now - 2_000, "died"))
    monkeypatch.setattr(time, "time", lambda: real() - 3600)  # behind: the lapsed lease would look live
    with TableLock(storage, HudiConfig(FAST)).held():
        doc = json.loads(_lock_file(s3_server, s3_bucket)[0])
        assert abs(doc["validUntil"] - (_store_now_ms(s3_server, s3_bucket) + 300_000)) < 3000


# -- taking, renewing, releasing -------------------------------------------------------------------
class _Race:
    """``n`` providers (owners) try once at the same moment, each in a thread that lives on until
    :meth:`end` (a lease is renewed while the thread that took it lives, as in Hudi)."""

    def __init__(self, storage: Storage, n: int) -> None:
        self.providers = [StorageBasedLockProvider(storage.uri(), SHORT_LEASE, storage=storage) for _ in range(n)]
        self.won: list[StorageBasedLockProvider] = []
        self._start, self._tried, self._end = threading.Barrier(n), threading.Barrier(n + 1), threading.Event()
        self._threads = [threading.Thread(target=self._attempt, args=(p,)) for p in self.providers]
        for t in self._threads:
            t.start()
        self._tried.wait()

    def _attempt(self, provider: StorageBasedLockProvider) -> None:
        self._start.wait()
        if provider.try_lock(0):
            self.won.append(provider)
        self._tried.wait()
        self._end.wait()

    def end(self) -> None:
        self._end.set()
        for t in self._threads:
            t.join()


def test_one_of_racing_owners_wins_renews_and_releases(lock_storage):
    race = _Race(lock_storage, 6)  # the file is absent: create-if-absent
    try:
        assert len(race.won) == 1
        holder = race.won[0]
        first = json.loads(lock_storage.read_bytes(LOCK_FILE))
        assert first["owner"] == holder.owner_id and not first["expired"]
        time.sleep(2.3)  # renewals every second push the lease ahead
        renewed = json.loads(lock_storage.read_bytes(LOCK_FILE))
        assert renewed["validUntil"] >= first["validUntil"] + 1000 and holder.still_held()
        again = _Race(lock_storage, 3)
        again.end()
        assert again.won == []  # a live lease excludes everyone else
        holder.unlock()
        released = json.loads(lock_storage.read_bytes(LOCK_FILE))  # Hudi's release: same owner and validUntil
        assert released["expired"] and released["owner"] == holder.owner_id
        assert released["validUntil"] >= renewed["validUntil"] and not holder.still_held()
    finally:
        race.end()
    race = _Race(lock_storage, 6)  # the file exists, released: replace-if-unchanged
    race.end()
    assert len(race.won) == 1
    race.won[0].unlock()


def test_holder_learns_of_a_takeover_and_the_commit_point_refuses(s3_server, s3_table):
    """A writer that judged the lease lapsed took the lock over: the next renewal tells the holder,
    completing an instant is refused, and the release leaves the new owner's lock alone."""
    table = HudiTable(s3_table, storage_options=s3_server.storage_options)
    bucket = s3_table.split("/")[2]
    point = CommitPoint.of(table, HudiConfig({**BASE, **SHORT_LEASE}))
    completed = [i.timestamp for i in table.timeline.completed_writes()]
    with point.lock.held():
        taker = _hudi_lock(False, _store_now_ms(s3_server, bucket) + 60_000, "taker")
        s3_server.client().put_object(Bucket=bucket, Key=f"t/{LOCK_FILE}", Body=taker)
        time.sleep(1.5)
        assert not point.lock.provider.still_held()
        with pytest.raises(HudiLockError, match="no longer surely held.*taker"):
            point.complete(table.timeline, "20991231000000000", "commit", b"{}")
    assert _lock_file(s3_server, bucket)[0] == taker
    assert [i.timestamp for i in table.timeline.reload().completed_writes()] == completed
    s3_server.client().put_object(Bucket=bucket, Key=f"t/{LOCK_FILE}", Body=_hudi_lock(True, 0, "taker"))


def test_renewals_failing_until_the_lease_lapses_end_the_hold(s3_server, s3_bucket):
    """The store refuses every write of the lock file (a real 403 answer): the holder stops
    counting on its lease one renew interval before others may take it."""
    import botocore.awsrequest

    storage = _storage(s3_server, s3_bucket)
    lock = TableLock(storage, HudiConfig({**FAST, **SHORT_LEASE}))
    events = s3.client(storage.options).meta.events

    class Denied:
        @staticmethod
        def stream(**_kw):
            yield b"<Error><Code>AccessDenied</Code><Message>refused by the test</Message></Error>"

    def refuse(request, **_kw):
        if request.url.split("?")[0].endswith(KEY):
            return botocore.awsrequest.AWSResponse(request.url, 403, {}, Denied())
        return None

    with lock.held():
        valid_until = json.loads(_lock_file(s3_server, s3_bucket)[0])["validUntil"]
        events.register("before-send.s3.PutObject", refuse)
        try:
            started = time.monotonic()
            while lock.provider.still_held() and time.monotonic() - started < 15:
                time.sleep(0.2)
            left_ms = valid_until - _store_now_ms(s3_server, s3_bucket)
            assert not lock.provider.still_held() and left_ms >= 0  # learnt before the lease ran out
            with pytest.raises(HudiLockError, match="no longer surely held"):
                lock.verify()
        finally:
            events.unregister("before-send.s3.PutObject", refuse)


_HOLDER = """
import sys, time
from pyhudi.config import HudiConfig
from pyhudi.storage import Storage, resolve_options
from pyhudi.transaction.lock import TableLock
import json
uri, opts, lock_opts = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
TableLock(Storage(uri, resolve_options(uri, opts)), HudiConfig(lock_opts)).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_lease_of_a_killed_holder_lapses_on_the_store_clock(s3_server, s3_bucket):
    storage = _storage(s3_server, s3_bucket)
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, storage.uri(), json.dumps(s3_server.storage_options),
                             json.dumps(SHORT_LEASE)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        first = json.loads(_lock_file(s3_server, s3_bucket)[0])
        time.sleep(2.2)
        last = json.loads(_lock_file(s3_server, s3_bucket)[0])
        assert last["validUntil"] > first["validUntil"]  # the other process renews
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    last = json.loads(_lock_file(s3_server, s3_bucket)[0])
    with pytest.raises(HudiLockError, match=last["owner"]):  # no one breaks a lease before it ends
        TableLock(storage, HudiConfig(FAST)).acquire()
    lock = TableLock(storage, HudiConfig({"hoodie.write.lock.wait_time_ms": "20000",
                                          "hoodie.write.lock.wait_time_ms_between_retry": "200"}))
    with lock.held():
        taken_at = _store_now_ms(s3_server, s3_bucket)
    assert last["validUntil"] + 500 < taken_at  # not before the lease ran out, by the store's clock
    assert taken_at <= last["validUntil"] + 3000  # and soon after


_COUNTER = """
import json, sys, time
from pyhudi.config import HudiConfig
from pyhudi.storage import Storage, resolve_options
from pyhudi.transaction.lock import TableLock
uri, opts, cfg, n = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
storage = Storage(uri, resolve_options(uri, opts))
lock = TableLock(storage, HudiConfig.of(cfg))
for _ in range(n):
    with lock.held():
        value = int(storage.read_bytes("counter"))
        time.sleep(0.005)
        storage.write_bytes("counter", str(value + 1).encode())
"""


def test_processes_exclude_each_other_on_s3(s3_server, s3_bucket):
    """Three processes increment one S3 object, reading and rewriting it under the table lock (the
    default on S3): no increment is lost."""
    storage = _storage(s3_server, s3_bucket)
    storage.write_bytes("counter", b"0")
    cfg = {"hoodie.write.lock.wait_time_ms_between_retry": "20"}
    procs = [subprocess.Popen([sys.executable, "-c", _COUNTER, storage.uri(), json.dumps(s3_server.storage_options),
                               json.dumps(cfg), "10"], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    assert storage.read_bytes("counter") == b"30"
    assert json.loads(storage.read_bytes(LOCK_FILE))["expired"]


# -- choosing the lock -----------------------------------------------------------------------------
def test_defaults_refusals_and_options(s3_server, s3_bucket, tmp_path):
    storage = _storage(s3_server, s3_bucket)
    assert isinstance(TableLock(storage, HudiConfig()).provider, StorageBasedLockProvider)
    assert isinstance(TableLock(str(tmp_path), HudiConfig()).provider, FileSystemLockProvider)
    for name in (STORAGE_BASED, "StorageBasedLockProvider"):
        assert isinstance(TableLock(str(tmp_path), HudiConfig({"hoodie.write.lock.provider": name})).provider,
                          StorageBasedLockProvider)
    in_process = {"hoodie.write.lock.provider": "InProcessLockProvider"}
    for mode in (OCC, BASE):
        with pytest.raises(HudiConfigError, match=r"cannot exclude writers in other processes.*"
                                                  r"pyhudi\.write\.lock\.single\.process=true"):
            TableLock(storage, HudiConfig.of({**mode, **in_process}))
        lock = TableLock(storage, HudiConfig.of({**mode, **in_process, "pyhudi.write.lock.single.process": "true"}))
        assert isinstance(lock.provider, InProcessLockProvider)
    assert isinstance(TableLock(str(tmp_path), HudiConfig.of({**OCC, **in_process})).provider, InProcessLockProvider)

    # a store that cannot create exclusively: one writer at a time, under the in-process lock
    uri = f"s3a://{s3_bucket}/t"
    plain = Storage(uri, resolve_options(uri, {**s3_server.storage_options,
                                                "fs.s3a.create.conditional.enabled": "false"}))
    assert isinstance(TableLock(plain, HudiConfig.of(BASE)).provider, InProcessLockProvider)
    with pytest.raises(HudiConfigError, match="only-if-absent.*conditional.enabled=false.*SINGLE_WRITER"):
        TableLock(plain, HudiConfig.of(OCC))
    with pytest.raises(HudiUnsupportedError, match="storage-based lock cannot work"):
        TableLock(plain, HudiConfig.of({"hoodie.write.lock.provider": STORAGE_BASED}))
    try:
        gcs = Storage("gs://bucket/t")
    except HudiUnsupportedError:
        gcs = None  # this pyarrow has no GCS
    if gcs is not None:
        with pytest.raises(HudiConfigError, match="gs://bucket/t.*no exclusive create"):
            TableLock(gcs, HudiConfig.of(OCC))
        with pytest.raises(HudiUnsupportedError, match="no conditional write"):
            TableLock(gcs, HudiConfig.of({"hoodie.write.lock.provider": STORAGE_BASED}))

    # Hudi's timing rules, checked as the options are read; the renew interval's old name
    validity, renew = "hoodie.write.lock.storage.validity.timeout.secs", "hoodie.write.lock.storage.renew.interval.secs"
    with pytest.raises(HudiConfigError, match=f"{validity}=60 must be at least 10 x {renew}"):
        HudiConfig.of({validity: "60"})
    cfg = HudiConfig.of({validity: "60", "hoodie.write.lock.storage.heartbeat.poll.secs": "6"})
    provider = TableLock(str(tmp_path), HudiConfig({**cfg.raw, "hoodie.write.lock.provider": STORAGE_BASED})).provider
    assert (provider.validity_s, provider.renew_s) == (60, 6)


_BEGIN = """
import json, sys, time
from pyhudi.commit.transaction import WriteTransaction
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiError
from pyhudi.storage import Storage, resolve_options
from pyhudi.table.table import HudiTable
uri, opts, cfg, at = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4])
table = HudiTable(Storage(uri, resolve_options(uri, opts)))
txn = WriteTransaction(table, HudiConfig.of(cfg))
time.sleep(max(0.0, at - time.time()))
try:
    print(json.dumps({"ok": txn.begin("commit")}), flush=True)
except HudiError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
"""


def test_single_writer_mode_sees_a_second_process_through_the_lock(s3_server, s3_table):
    """Writers in three processes start at the same moment in single-writer mode: the lock makes
    "no write in progress? then request mine" one step, so exactly one starts, the others are told.
    (The started write is left pending, its heartbeat stopped: this test comes last on the table.)"""
    at = time.time() + 4
    procs = [subprocess.Popen([sys.executable, "-c", _BEGIN, s3_table, json.dumps(s3_server.storage_options),
                               json.dumps(BASE), str(at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out))
    started = [r for r in results if "ok" in r]
    assert len(started) == 1, results
    assert all(r.get("error") == "HudiConcurrentWriteError" and started[0]["ok"] in r["message"]
               for r in results if "ok" not in r), results


# -- writers in two processes ----------------------------------------------------------------------
def _model(outcomes: list[dict]) -> dict[str, tuple]:
    from writer_process import initial_rows

    model = {k: (p, ts, v) for k, p, ts, v in initial_rows()}
    for o in sorted((o for o in outcomes if o["ok"]), key=lambda o: o["instant"]):
        for k, p, ts, v in o["rows"]:
            if o["op"] == "delete":
                model.pop(k, None)
            else:
                model[k] = (p, ts, v)
    return model


def test_two_processes_occ_on_s3a_lose_no_committed_write(s3_spark, s3_server, s3_bucket, tmp_path):
    """Two processes, each with its own Spark, upsert and delete on random partitions of one s3a://
    table under optimistic concurrency control and the storage-based lock (the default there).
    Every write reported committed is visible, the table is what the committed writes alone make
    it (as hudi-rs reads it), and every refusal is a conflict Hudi's rule names: a file group
    of the write changed by a commit completed after the write started."""
    import hudi
    from writer_process import initial_rows

    path = f"s3a://{s3_bucket}/t"
    options = {**OCC, **s3_server.hadoop_conf}
    pyhudi.write(s3_spark.createDataFrame(initial_rows(), "id string, p string, ts long, val string"), path,
                 {**OCC, "hoodie.datasource.write.operation": "bulk_insert"})
    procs = []
    for w in range(2):
        result = tmp_path / f"w{w}.json"
        procs.append((result, subprocess.Popen(
            # seeds whose writes update the same partitions round by round (p0, p1, then p0 and more)
            [sys.executable, WRITER, "stress", path, str(result), str(w), str(203 + w), "3", json.dumps(options)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    outcomes = []
    for result, proc in procs:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outcomes += json.loads(result.read_text())
    failed = [o for o in outcomes if not o["ok"]]
    assert {o["error"] for o in failed} <= {"HudiWriteConflictError"}, failed
    assert len(outcomes) - len(failed) >= 3  # one write of each round at least
    firsts = [o for o in outcomes if o["rows"][0][3].endswith("-0")]
    if max(o["started"] for o in firsts) + 5 < min(o["ended"] for o in firsts):
        # both first writes (updates of partition p0) began long before either ended: one must conflict
        assert sum(not o["ok"] for o in firsts) == 1, firsts

    model = _model(outcomes)
    batches = hudi.HudiTable(path.replace("s3a://", "s3://"), options=s3_server.storage_options).read()
    rs = pa.Table.from_batches(batches).to_pylist() if batches else []
    assert {r["id"]: (r["p"], r["ts"], r["val"]) for r in rs} == model

    table = HudiTable(path, storage_options=s3_server.storage_options)
    timeline = table.timeline
    assert timeline.pending() == []
    writes = {i.timestamp: timeline.commit_metadata(i) for i in timeline.completed_writes()}
    committed = {o["instant"] for o in outcomes if o["ok"]}
    assert committed <= set(writes)
    for instant in committed:  # no commit overwrote a file group another one changed since it started
        check = json.loads(writes[instant].extra_metadata[CONFLICT_CHECK_KEY])
        assert check["conflicts"] == []
        for other in check["candidates"]:
            assert not writes[instant].touched_file_groups() & writes[other].touched_file_groups()
    for o in failed:  # each refusal names a completed commit that changed a partition it wrote
        named = re.findall(r"commit (\d{17}) \(file groups ([^)]*)", o["message"])  # the message is cut at 300
        assert named, o["message"]
        for other, groups in named:
            assert other in writes
            assert {g.split("/")[0] for g in groups.split(", ") if "/" in g} <= {row[1] for row in o["rows"]}
    assert json.loads(_lock_file(s3_server, s3_bucket)[0])["expired"]  # released by the last holder
