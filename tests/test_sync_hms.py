"""The Hive metastore client (pyhudi.sync.hms) and its thrift codec (pyhudi.sync.thrift).

The codec tests need no server; the client tests run against Hive 2.3's real metastore, started by
the suite from PySpark's jars (the ``hms_server`` fixture, tests/hms_server.py).
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from dataclasses import replace

import pytest

from pyhudi.sync.catalog import Column, HudiCatalogError, PartitionEntry, StorageEntry, TableEntry
from pyhudi.sync.hms import (
    HiveMetastoreClient,
    escape_path_name,
    parse_uris,
    partition_name,
    read_table,
    table_fields,
)
from pyhudi.sync.thrift import (
    BOOL,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    STRING,
    STRUCT,
    Field,
    ListOf,
    MapOf,
    ThriftApplicationError,
    ThriftClient,
    decode_struct,
    encode_call,
    encode_struct,
)

PARQUET_IN = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
PARQUET_OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
_NAMES = itertools.count(1)


def entry(location: str, *, database: str = "db", name: str = "t", columns=("id:bigint", "name:string"),
          keys=("dt:string", "hr:int"), parameters=None, owner: str = "") -> TableEntry:
    cols = tuple(Column(*c.split(":", 1)) for c in columns)
    sd = StorageEntry(cols, location, PARQUET_IN, PARQUET_OUT, PARQUET_SERDE,
                      {"path": location, "hoodie.query.as.ro.table": "false", "serialization.format": "1"})
    return TableEntry(database, name, sd, tuple(Column(*k.split(":", 1)) for k in keys),
                      parameters if parameters is not None else
                      {"EXTERNAL": "TRUE", "spark.sql.sources.provider": "hudi", "last_commit_time_sync": "1"},
                      owner=owner)


# ---------------------------------------------------------------------------------------------
# Codec, no server


def test_struct_round_trip_every_type():
    inner = [Field(1, STRING, "x"), Field(2, I64, -(2**40))]
    fields = [Field(1, BOOL, True), Field(2, BYTE, -3), Field(3, I16, -1), Field(4, I32, 2**31 - 1),
              Field(5, I64, 2**62), Field(6, DOUBLE, 1.5), Field(7, STRING, "héllo ✓"), Field(8, STRING, None),
              Field(9, ListOf(STRING), ["a", "", "b"]), Field(10, MapOf(STRING, STRING), {"k": "v", "é": ""}),
              Field(11, STRUCT, inner), Field(12, ListOf(STRUCT), [inner, []]),
              Field(13, MapOf(STRING, ListOf(I32)), {"n": [1, 2]}), Field(14, BOOL, False)]
    assert decode_struct(encode_struct(fields)) == {
        1: True, 2: -3, 3: -1, 4: 2**31 - 1, 5: 2**62, 6: 1.5, 7: "héllo ✓", 9: ["a", "", "b"],
        10: {"k": "v", "é": ""}, 11: {1: "x", 2: -(2**40)}, 12: [{1: "x", 2: -(2**40)}, {}], 13: {"n": [1, 2]},
        14: False}


def test_wire_bytes_of_a_strict_call():
    # strict binary protocol: version|type, name, seqid, then the args struct (type, id, value, STOP)
    data = encode_call("get_database", 7, [Field(1, STRING, "db")])
    assert data == (struct.pack("!I", 0x80010001) + struct.pack("!i", 12) + b"get_database"
                    + struct.pack("!i", 7) + b"\x0b\x00\x01" + struct.pack("!i", 2) + b"db" + b"\x00")


def test_decoding_skips_nothing_and_the_mapping_ignores_unknown_fields():
    # generic decoding keeps a field the mapping does not know (a newer server's); the mapping ignores it
    t = entry("file:/x/T", name="T", columns=("Id:bigint",), owner="alice")
    fields = table_fields(t, 5) + [Field(99, ListOf(I32), [1, 2]), Field(16, STRING, "hive")]
    decoded = decode_struct(encode_struct(fields))
    assert decoded[99] == [1, 2] and decoded[4] == 5
    back = read_table(decoded)
    assert back.storage == StorageEntry((Column("id", "bigint"),), "file:/x/T", PARQUET_IN, PARQUET_OUT,
                                        PARQUET_SERDE, t.storage.serde_parameters)
    assert (back.name, back.owner, back.partition_keys, back.parameters) == ("T", "alice", t.partition_keys,
                                                                             t.parameters)


def test_escape_path_name_as_hive():
    assert escape_path_name("2024/01/01") == "2024%2F01%2F01"
    assert escape_path_name("a b=c:d%e") == "a b%3Dc%3Ad%25e"
    assert escape_path_name("é✓ -_.,;") == "é✓ -_.,;"
    assert escape_path_name("\"#'*?\\{[]^\x7f\t") == "%22%23%27%2A%3F%5C%7B%5B%5D%5E%7F%09"
    assert escape_path_name("") == "__HIVE_DEFAULT_PARTITION__"
    assert partition_name(["DT", "hr"], ["x/y", "1"]) == "dt=x%2Fy/hr=1"


def test_parse_uris():
    assert parse_uris("thrift://a:9083, thrift://b.example:1") == [("a", 9083), ("b.example", 1)]
    assert parse_uris("thrift://[::1]:9083") == [("::1", 9083)]
    for bad in ("", "http://a:9083", "thrift://a", "thrift://a:x"):
        with pytest.raises(HudiCatalogError):
            parse_uris(bad)


# ---------------------------------------------------------------------------------------------
# Against the real metastore


@pytest.fixture
def client(hms_server):
    with HiveMetastoreClient(hms_server.uri, timeout=30) as c:
        yield c


@pytest.fixture
def db(client):
    name = f"db_{next(_NAMES)}"
    client.create_database(name, description="pyhudi tests")
    return name


def raw(client: HiveMetastoreClient, method: str, *args: Field) -> dict:
    """A thrift call outside the client's API (to look at what the metastore holds)."""
    return client._client.call(method, list(args))


def test_database_create_and_exists(client):
    name = f"db_{next(_NAMES)}"
    assert client.database_exists(name) is False
    client.create_database(name, description="automatically created by pyhudi")
    client.create_database(name, description="again")  # an existing database is not an error
    assert client.database_exists(name) is True
    assert client.database_exists("default") is True
    assert client.calls == {"get_database": 3, "create_database": 2}
    stored = raw(client, "get_database", Field(1, STRING, name))[0]
    assert stored[2] == "automatically created by pyhudi"


def test_table_create_then_get_is_what_was_sent(client, db, tmp_path):
    sent = entry(f"file:{tmp_path}/Table", database=db, name="Trips", columns=("_hoodie_commit_time:string",
                 "Id:bigint", "rec:struct<a:int,b:array<string>>"), keys=("Dt:string",))
    assert client.get_table(db, "trips") is None
    before = int(time.time())
    client.create_table(sent)
    got = client.get_table(db, "TRIPS")
    assert got is not None
    # the metastore folds names to lower case and adds transient_lastDdlTime; the rest is as sent
    params = dict(got.parameters)
    ddl_time = int(params.pop("transient_lastDdlTime"))
    assert before <= ddl_time <= time.time() + 1
    assert params == sent.parameters
    assert got.name == "trips" and got.database == db and got.table_type == "EXTERNAL_TABLE"
    assert got.owner and got.owner == raw(client, "get_table", Field(1, STRING, db), Field(2, STRING, "trips"))[0][3]
    assert got.storage.columns == (Column("_hoodie_commit_time", "string"), Column("id", "bigint"),
                                   Column("rec", "struct<a:int,b:array<string>>"))
    assert got.partition_keys == (Column("dt", "string"),)
    assert got.storage == replace(sent.storage, columns=got.storage.columns)
    assert (tmp_path / "Table").is_dir()  # the metastore makes the location's folder
    with pytest.raises(HudiCatalogError, match=rf"create_table for {db}.Trips.*AlreadyExistsException"):
        client.create_table(sent)
    client.drop_table(db, "trips")
    client.drop_table(db, "trips")  # absent: not an error
    assert client.get_table(db, "trips") is None
    assert (tmp_path / "Table").is_dir()  # data kept
    assert client.calls["drop_table"] == 2 and client.calls["create_table"] == 2


def test_create_table_in_missing_database(client, tmp_path):
    with pytest.raises(HudiCatalogError, match="Create database no_such_db first"):
        client.create_table(entry(str(tmp_path), database="no_such_db"))


def test_update_table_with_and_without_cascade(client, db, tmp_path):
    t = entry(f"file:{tmp_path}/t", database=db)
    client.create_table(t)
    client.add_partitions(t, [PartitionEntry(("2024-01-01", "1"), f"file:{tmp_path}/t/a")])
    get = [Field(1, STRING, db), Field(2, STRING, "t")]
    create_time = raw(client, "get_table", *get)[0][4]

    def partition_columns() -> list[str]:
        [p] = raw(client, "get_partitions", *get, Field(3, I16, -1))[0]
        return [c[1] for c in p[6][1]]

    time.sleep(1.05)  # transient_lastDdlTime has seconds
    wider = entry(t.storage.location, database=db, columns=("id:bigint", "name:string", "extra:double"),
                  parameters={**t.parameters, "last_commit_time_sync": "2"})
    client.update_table(wider, cascade=False)
    got = client.get_table(db, "t")
    assert got is not None and [c.name for c in got.storage.columns] == ["id", "name", "extra"]
    assert got.parameters["last_commit_time_sync"] == "2"
    assert partition_columns() == ["id", "name"]  # without cascade the partition keeps its columns
    after = raw(client, "get_table", *get)[0]
    assert after[4] == create_time  # creation time kept
    assert int(after[9]["transient_lastDdlTime"]) > create_time  # the metastore stamps every alter

    widest = entry(t.storage.location, database=db, columns=("id:bigint", "name:string", "extra:double", "z:int"),
                   parameters=got.parameters)  # sent back with the old transient_lastDdlTime
    client.update_table(widest, cascade=True)
    assert partition_columns() == ["id", "name", "extra", "z"]
    assert client.calls["alter_table_with_environment_context"] == 2

    with pytest.raises(HudiCatalogError, match="partition keys can not be changed"):
        client.update_table(entry(t.storage.location, database=db, keys=("dt:string",)), cascade=False)
    with pytest.raises(HudiCatalogError, match=f"alter_table_with_environment_context for {db}.absent"):
        client.update_table(entry(t.storage.location, database=db, name="absent"), cascade=False)


def test_partitions_add_get_update_drop(client, db, tmp_path):
    base = f"file:{tmp_path}/t"
    t = entry(base, database=db)
    client.create_table(t)
    client.calls.clear()
    parts = [PartitionEntry(("2024-01-01", str(h)), f"{base}/dt=2024-01-01/hr={h}") for h in range(3)]
    client.add_partitions(t, parts)
    client.add_partitions(t, parts[1:] + [PartitionEntry(("2024-01-02", "0"), f"{base}/new")])  # re-add: skipped
    assert client.get_partitions(t) == {**{p.values: p.location for p in parts}, ("2024-01-02", "0"): f"{base}/new"}
    # each partition has its own descriptor: the table's with its own location
    stored = raw(client, "get_partitions", Field(1, STRING, db), Field(2, STRING, "t"), Field(3, I16, -1))[0]
    assert sorted(p[6][2] for p in stored) == sorted([p.location for p in parts] + [f"{base}/new"])
    assert {p[6][7][3]["path"] for p in stored} == {base} and {p[6][3] for p in stored} == {PARQUET_IN}

    asked = [("2024-01-01", "0"), ("2024-01-01", "2"), ("1999-01-01", "0")]
    assert client.get_partitions(t, asked) == {asked[0]: parts[0].location, asked[1]: parts[2].location}
    assert client.get_partitions(t, []) == {}

    def create_time(values: list[str]) -> int:
        [p] = raw(client, "get_partitions_by_names", Field(1, STRING, db), Field(2, STRING, "t"),
                  Field(3, ListOf(STRING), [partition_name(["dt", "hr"], values)]))[0]
        return int(p[4])

    created = create_time(["2024-01-01", "0"])
    assert created > 0
    client.update_partitions(t, [PartitionEntry(("2024-01-01", "0"), f"{base}/moved")])
    assert client.get_partitions(t, [("2024-01-01", "0")]) == {("2024-01-01", "0"): f"{base}/moved"}
    assert create_time(["2024-01-01", "0"]) == created  # as read by get_partitions, sent back
    with pytest.raises(HudiCatalogError, match=f"alter_partitions for {db}.t"):
        client.update_partitions(t, [PartitionEntry(("1999-01-01", "0"), f"{base}/x")])

    client.drop_partitions(t, [("2024-01-01", "1"), ("1999-01-01", "0")])  # one absent: skipped
    client.drop_partitions(t, [("2024-01-01", "1")])  # again
    assert set(client.get_partitions(t)) == {("2024-01-01", "0"), ("2024-01-01", "2"), ("2024-01-02", "0")}
    assert (tmp_path / "t" / "dt=2024-01-01" / "hr=1").is_dir()  # data kept
    with pytest.raises(HudiCatalogError, match="one value per key"):
        client.drop_partitions(t, [("2024-01-01",)])
    assert client.calls == {"add_partitions_req": 2, "get_partitions": 2, "get_partitions_by_names": 2,
                            "alter_partitions": 2, "drop_partitions_req": 2}


def test_partition_values_with_special_characters(client, db, tmp_path):
    t = entry(f"file:{tmp_path}/t", database=db)
    client.create_table(t)
    odd = ["a b", "x/y", "k=v", "10:30", "50%", "ünï✓", "#?*'\"\\", "{[^]}", "%2F", "tab\there"]
    parts = [PartitionEntry((v, str(i)), f"file:{tmp_path}/t/p{i}") for i, v in enumerate(odd)]
    client.add_partitions(t, parts)
    assert client.get_partitions(t) == {p.values: p.location for p in parts}
    # the names the client computes are the names the metastore stores
    names = raw(client, "get_partition_names", Field(1, STRING, db), Field(2, STRING, "t"), Field(3, I16, -1))[0]
    assert sorted(names) == sorted(partition_name(["dt", "hr"], p.values) for p in parts)
    assert client.get_partitions(t, [p.values for p in parts[:5]]) == {p.values: p.location for p in parts[:5]}
    client.drop_partitions(t, [p.values for p in parts[1::2]])
    assert client.get_partitions(t) == {p.values: p.location for p in parts[0::2]}


def test_many_partitions_in_bounded_calls(client, db, tmp_path):
    t = entry(f"file:{tmp_path}/t", database=db)
    client.create_table(t)
    parts = [PartitionEntry((f"2024-{m:02d}-{d:02d}", "0"), f"file:{tmp_path}/t/{m}/{d}")
             for m in range(1, 11) for d in range(1, 26)]
    assert len(parts) == 250
    client.add_partitions(t, parts)
    assert client.calls["add_partitions_req"] == 1  # the default batch (1000) takes them all
    assert client.get_partitions(t) == {p.values: p.location for p in parts}
    assert client.calls["get_partitions"] == 1
    client.batch_size = 100
    assert len(client.get_partitions(t, [p.values for p in parts])) == 250
    assert client.calls["get_partitions_by_names"] == 3  # 100 + 100 + 50
    client.drop_partitions(t, [p.values for p in parts[:101]])
    assert client.calls["drop_partitions_req"] == 2 and len(client.get_partitions(t)) == 149
    client.add_partitions(t, parts[95:105])  # 6 new, 4 existing: skipped
    assert client.calls["add_partitions_req"] == 2
    assert set(client.get_partitions(t)) == {p.values for p in parts[95:]}


def test_unreachable_uri_fails_fast_naming_it():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"thrift://127.0.0.1:{port}"
    start = time.monotonic()
    with pytest.raises(HudiCatalogError, match=rf"get_table for db\.t failed.*{uri}") as e:
        HiveMetastoreClient(uri, timeout=5).get_table("db", "t")
    assert time.monotonic() - start < 2
    assert "refused" in str(e.value).lower()


def test_uri_list_tries_each_in_order(hms_server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with HiveMetastoreClient(f"thrift://127.0.0.1:{dead},{hms_server.uri}") as c:
        assert c.database_exists("default")
        assert c._client.endpoint == ("127.0.0.1", hms_server.port)
        assert c.calls == {"get_database": 1}


def test_broken_connection_is_reopened_once(client):
    assert client.database_exists("default")
    first = client._client._sock
    first.shutdown(socket.SHUT_RDWR)  # as if the server had closed an idle connection
    assert client.database_exists("default")
    assert client._client._sock is not first and client.calls == {"get_database": 2}


def test_application_exception_is_an_error_and_the_connection_survives(hms_server):
    with ThriftClient([("127.0.0.1", hms_server.port)], timeout=10) as c:
        with pytest.raises(ThriftApplicationError, match="no_such_method") as e:
            c.call("no_such_method", [])
        assert e.value.kind == 1  # UNKNOWN_METHOD
        assert "default" in c.call("get_all_databases", [])[0]
