"""A Hive metastore for the tests: Hive 2.3's own ``HiveMetaStore`` from the jars PySpark ships,
on an embedded Derby database in a temporary folder, a process the suite starts itself (as
tests/s3server.py starts moto).

It listens on 127.0.0.1 (and every other interface: HiveMetaStore binds the wildcard address) and
speaks the metastore's default transport: thrift binary protocol, unframed, no SASL.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from pyhudi.sync.thrift import STRING, Field, ThriftClient

_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_jars() -> Path:
    """PySpark's jar folder (found without importing pyspark, which would start nothing but costs time)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed: the metastore runs from its jars")
    return Path(spec.origin).parent / "jars"


class HiveMetastoreServer:
    """A running metastore: its ``uri`` (``thrift://127.0.0.1:PORT``), its folders, :meth:`stop`."""

    def __init__(self, root: Path, *, timeout: float = 90.0) -> None:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is not on PATH")
        self.root = root
        self.warehouse = root / "wh"
        self.port = free_port()
        self.uri = f"thrift://127.0.0.1:{self.port}"
        self.log_path = root / "metastore.log"
        self._log = open(self.log_path, "w")
        command = [
            java, "-Xmx512m",
            "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
            f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={root / 'db'};create=true",
            "-Ddatanucleus.schema.autoCreateAll=true", "-Dhive.metastore.schema.verification=false",
            "-Dderby.system.durability=test",  # no fsync per commit: a throw-away database
            f"-Dhive.metastore.warehouse.dir={self.warehouse}",
            "-cp", f"{spark_jars()}/*", _CLASS, "-p", str(self.port)]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, cwd=root)
        try:
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait(self, timeout: float) -> None:
        """Until a real thrift call answers: the port opens before the metastore can serve."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with ThriftClient([("127.0.0.1", self.port)], timeout=10) as client:
                    if 0 in client.call("get_database", [Field(1, STRING, "default")]):
                        return
            except Exception as e:  # not listening yet, or answering with an error while starting
                last = e
            time.sleep(0.3)
        state = "exited" if self.process.poll() is not None else f"not answering after {timeout:g} s"
        raise RuntimeError(f"the Hive metastore {state} (last error: {last}); log tail:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
