"""The AWS Glue Data Catalog as a :class:`~pyhudi.sync.catalog.CatalogClient`, through boto3.

What Apache Hudi's ``AWSGlueCatalogSyncClient`` sends (docs/catalog-sync.md §2.3, §4) is kept:
the same table and partition inputs, ``s3a://`` / ``s3n://`` locations sent as ``s3://``, batches
of 100 creates or updates and 25 deletes, ``SkipArchive`` on ``UpdateTable``. Where Hudi falls
short this client does not:

- one ``UpdateTable`` per table change (Hudi sends up to three per sync);
- a partition that is already gone counts as dropped (Hudi issue #9805 failed the whole sync);
- every batch runs and every refused partition is reported together, by its values and Glue's
  error code, instead of the first error hiding the rest or an error passing silently;
- ``BatchGetPartition`` keys Glue leaves unprocessed (under load) are asked again, never
  taken for absent partitions;
- partition values Glue's published limits refuse (empty, longer than 1024 characters, not one per
  partition key) are reported before sending, so they do not take their batch down with them.

``cascade`` has no Glue counterpart: Glue keeps a full storage descriptor per partition and never
copies the table's onto them. After a column change the sync logic calls :meth:`update_partitions`
over the partitions (Hudi does this only when a column *type* changed).

Calls are counted per API call made (botocore's own retries of one call are not counted again).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pyhudi.sync.catalog import Column, HudiCatalogError, PartitionEntry, StorageEntry, TableEntry

__all__ = ["GlueClient", "GluePartitionError", "PartitionFailure", "glue_location"]

#: Glue's per-call limits (the ``max`` of the request lists in Glue's service model)
CREATE_BATCH = 100
UPDATE_BATCH = 100
DELETE_BATCH = 25
GET_BATCH = 1000
PAGE_SIZE = 1000
#: Glue's limit on one partition value (``ValueString``: 1 to 1024 characters)
MAX_VALUE_CHARS = 1024
#: rounds of asking again for the keys a BatchGetPartition left unprocessed
UNPROCESSED_ROUNDS = 5
#: failed partitions named in an error message (all of them are in ``GluePartitionError.failures``)
NAMED_FAILURES = 10

_T = TypeVar("_T")


def glue_location(location: str) -> str:
    """The location as Glue (and Athena) expect it: Hadoop's ``s3a://`` and ``s3n://`` schemes are
    ``s3://`` outside Hadoop, and Athena reads only ``s3://``."""
    for scheme in ("s3a://", "s3n://"):
        if location.startswith(scheme):
            return "s3://" + location[len(scheme):]
    return location


@dataclass(frozen=True)
class PartitionFailure:
    """One partition Glue refused (or that Glue's limits refuse before sending): its values, Glue's
    error code and message."""

    values: tuple[str, ...]
    code: str
    message: str


class GluePartitionError(HudiCatalogError):
    """Some partitions of a batch call were refused; ``failures`` lists each one. The others were
    written: a re-run sync adds, updates or drops only what the catalog still lacks."""

    def __init__(self, message: str, failures: Sequence[PartitionFailure]) -> None:
        super().__init__(message)
        self.failures = tuple(failures)


def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _column_input(column: Column) -> dict[str, str]:
    return {"Name": column.name, "Type": column.type, "Comment": column.comment}


def _column(raw: Mapping[str, Any]) -> Column:
    return Column(str(raw["Name"]), str(raw.get("Type", "")), str(raw.get("Comment", "")))


def _storage_input(storage: StorageEntry) -> dict[str, Any]:
    return {
        "Columns": [_column_input(c) for c in storage.columns],
        "Location": glue_location(storage.location),
        "InputFormat": storage.input_format,
        "OutputFormat": storage.output_format,
        "SerdeInfo": {"SerializationLibrary": storage.serde, "Parameters": dict(storage.serde_parameters)},
    }


def _storage(raw: Mapping[str, Any]) -> StorageEntry:
    serde = raw.get("SerdeInfo") or {}
    return StorageEntry(
        columns=tuple(_column(c) for c in raw.get("Columns") or ()),
        location=str(raw.get("Location", "")),
        input_format=str(raw.get("InputFormat", "")),
        output_format=str(raw.get("OutputFormat", "")),
        serde=str(serde.get("SerializationLibrary", "")),
        serde_parameters=dict(serde.get("Parameters") or {}),
    )


def _table_input(table: TableEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Name": table.name,
        "TableType": table.table_type,
        "Parameters": dict(table.parameters),
        "PartitionKeys": [_column_input(c) for c in table.partition_keys],
        "StorageDescriptor": _storage_input(table.storage),
    }
    if table.owner:  # Glue refuses an empty owner (NameString: at least 1 character)
        out["Owner"] = table.owner
    return out


#: fields of a Glue table an entry does not model: an update keeps what the table had (UpdateTable
#: replaces the whole table, and a user's description or descriptor settings are not the sync's)
_KEPT = ("Description", "Retention", "TargetTable", "ViewOriginalText", "ViewExpandedText")
_KEPT_STORAGE = ("Compressed", "NumberOfBuckets", "BucketColumns", "SortColumns", "Parameters", "SkewedInfo",
                 "StoredAsSubDirectories")


def _kept(table_input: dict[str, Any], remote: Mapping[str, Any] | None) -> dict[str, Any]:
    """``table_input`` with the fields it does not set taken from the table as last read."""
    if not remote:
        return table_input
    out = {**{k: remote[k] for k in _KEPT if k in remote}, **table_input}
    sd = remote.get("StorageDescriptor") or {}
    out["StorageDescriptor"] = {**{k: sd[k] for k in _KEPT_STORAGE if k in sd}, **out["StorageDescriptor"]}
    return out


def _table(database: str, raw: Mapping[str, Any]) -> TableEntry:
    return TableEntry(
        database=database,
        name=str(raw["Name"]),
        storage=_storage(raw.get("StorageDescriptor") or {}),
        partition_keys=tuple(_column(c) for c in raw.get("PartitionKeys") or ()),
        parameters=dict(raw.get("Parameters") or {}),
        table_type=str(raw.get("TableType", "")),
        owner=str(raw.get("Owner", "")),
    )


def _partition_input(table: TableEntry, partition: PartitionEntry) -> dict[str, Any]:
    return {"Values": list(partition.values), "StorageDescriptor": _storage_input(table.storage.at(partition.location))}


def _shown(values: Sequence[str]) -> str:
    return "[" + ", ".join(repr(v) for v in values) + "]"


class GlueClient:
    """AWS Glue Data Catalog client (``kind`` ``"glue"``).

    ``region`` / ``endpoint``: Hudi's ``hoodie.aws.glue.region`` / ``hoodie.aws.glue.endpoint``
    (None: boto3's default region chain and AWS's endpoint for it); ``catalog_id``:
    ``hoodie.datasource.meta.sync.glue.catalogId``, another account's catalog (None: the caller's);
    ``skip_archive``: ``hoodie.datasource.meta.sync.glue.skip_table_archive`` (Glue keeps no old
    table version per update, which matters since every sync updates the table); the keys:
    ``hoodie.aws.access.key`` / ``secret.key`` / ``session.token`` (None: boto3's default chain).
    Retries are botocore's adaptive mode (client-side rate limiting on throttling), at most
    ``max_attempts`` tries per call, so an unreachable endpoint fails within seconds.
    """

    kind = "glue"

    def __init__(self, *, region: str | None = None, endpoint: str | None = None, catalog_id: str | None = None,
                 skip_archive: bool = True, access_key: str | None = None, secret_key: str | None = None,
                 session_token: str | None = None, max_attempts: int = 3, connect_timeout_s: float = 5.0,
                 read_timeout_s: float = 60.0) -> None:
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError
        except ImportError:  # pragma: no cover - boto3 is a dependency
            raise HudiCatalogError("syncing to AWS Glue needs boto3 (pip install boto3)") from None
        self.calls: Counter[str] = Counter()
        self._read: dict[tuple[str, str], Mapping[str, Any]] = {}  # tables as last read, by (database, name)
        self.catalog_id = catalog_id
        self.skip_archive = skip_archive
        self.endpoint = endpoint
        config = Config(retries={"mode": "adaptive", "max_attempts": max_attempts},
                        connect_timeout=connect_timeout_s, read_timeout=read_timeout_s)
        try:
            self.glue: Any = boto3.session.Session().client(
                "glue", region_name=region, endpoint_url=endpoint, aws_access_key_id=access_key,
                aws_secret_access_key=secret_key, aws_session_token=session_token, config=config)
        except (BotoCoreError, ValueError) as exc:  # NoRegionError; ValueError: an invalid endpoint URL
            raise HudiCatalogError(
                f"cannot set up the AWS Glue client (region {region!r}, endpoint {endpoint!r}): {exc}; set the "
                f"region (hoodie.aws.glue.region or AWS_REGION) and a valid endpoint (hoodie.aws.glue.endpoint)"
            ) from exc
        self.region = str(self.glue.meta.region_name)

    @property
    def where(self) -> str:
        """The catalog, for messages: its endpoint (AWS's for the region when none was given) and catalog id."""
        place = self.endpoint or str(self.glue.meta.endpoint_url)
        return place + (f" (catalog {self.catalog_id})" if self.catalog_id else "")

    def close(self) -> None:
        """Release the HTTP connections."""
        self.glue.close()

    # -- calls -------------------------------------------------------------------------------------
    def _call(self, api: str, target: str, *, ok: tuple[str, ...] = (), **params: Any) -> dict[str, Any] | None:
        """One Glue call, counted. Error codes in ``ok`` return None (an absent or existing object
        the caller accepts); every other failure raises :class:`HudiCatalogError` naming the call,
        the catalog and ``target`` (``database.table``)."""
        from botocore import xform_name
        from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

        if self.catalog_id is not None:
            params["CatalogId"] = self.catalog_id
        self.calls[api] += 1
        try:
            return dict(getattr(self.glue, xform_name(api))(**params))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in ok:
                return None
            raise HudiCatalogError(
                f"Glue {api} of {target} at {self.where} failed: {code}: {error.get('Message', '')}; "
                f"{self._advice(code, api)}") from exc
        except ParamValidationError as exc:  # botocore checks Glue's published limits before sending
            raise HudiCatalogError(
                f"Glue {api} of {target} at {self.where} not sent: Glue refuses these parameters: {exc}; "
                f"fix the names or values it names (Glue needs non-empty names and partition values)") from exc
        except BotoCoreError as exc:  # unreachable endpoint, no credentials
            raise HudiCatalogError(
                f"Glue {api} of {target} at {self.where} failed: {exc}; check the endpoint and region "
                f"(hoodie.aws.glue.endpoint, hoodie.aws.glue.region) and the credentials (hoodie.aws.access.key "
                f"and secret.key, or the AWS default chain). The data commit stays; the next sync catches up"
            ) from exc

    @staticmethod
    def _advice(code: str, api: str) -> str:
        if code == "AccessDeniedException":
            return f"grant glue:{api} on the catalog, database and table to these credentials"
        if code in ("UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException"):
            return "the credentials are wrong or expired (hoodie.aws.access.key, secret.key, session.token)"
        if code == "EntityNotFoundException":
            return "the database or table is absent: create it (a full sync registers the table again)"
        if code in ("ThrottlingException", "ResourceNumberLimitExceededException"):
            return "Glue's limits were reached; re-run the sync later or raise the account's quota"
        return "the data commit stays committed; fix the cause and re-run the sync"

    # -- databases and tables ----------------------------------------------------------------------
    def database_exists(self, database: str) -> bool:
        """Whether the database exists (``GetDatabase``; Glue reports absence as EntityNotFoundException)."""
        return self._call("GetDatabase", database, ok=("EntityNotFoundException",), Name=database) is not None

    def create_database(self, database: str, *, description: str) -> None:
        """Create the database; one created meanwhile (AlreadyExistsException) is not an error."""
        self._call("CreateDatabase", database, ok=("AlreadyExistsException",),
                   DatabaseInput={"Name": database, "Description": description})

    def get_table(self, database: str, name: str) -> TableEntry | None:
        """The table as Glue holds it (locations as stored: ``s3://``), or None when the table (or its
        database) is absent."""
        got = self._call("GetTable", f"{database}.{name}", ok=("EntityNotFoundException",),
                         DatabaseName=database, Name=name)
        if got is None:
            return None
        self._read[(database, name)] = got["Table"]
        return _table(database, got["Table"])

    def create_table(self, table: TableEntry) -> None:
        """Register the table (``CreateTable``); one that exists already is an error the sync must see
        (it would otherwise keep an entry it did not write)."""
        self._call("CreateTable", f"{table.database}.{table.name}", DatabaseName=table.database,
                   TableInput=_table_input(table))

    def update_table(self, table: TableEntry, *, cascade: bool) -> None:
        """Replace the table's entry in one ``UpdateTable`` (``SkipArchive`` as configured). ``cascade``
        is accepted for the protocol and ignored: Glue partitions carry their own descriptor, which
        :meth:`update_partitions` rewrites when the sync decides they must follow."""
        del cascade
        self._call("UpdateTable", f"{table.database}.{table.name}", DatabaseName=table.database,
                   TableInput=_kept(_table_input(table), self._read.get((table.database, table.name))),
                   SkipArchive=self.skip_archive)

    def drop_table(self, database: str, name: str) -> None:
        """Remove the table's entry (``DeleteTable``; Glue drops its partitions with it); an absent table
        is not an error."""
        self._call("DeleteTable", f"{database}.{name}", ok=("EntityNotFoundException",),
                   DatabaseName=database, Name=name)

    # -- partitions --------------------------------------------------------------------------------
    def get_partitions(self, table: TableEntry, values: Sequence[tuple[str, ...]] | None = None
                       ) -> dict[tuple[str, ...], str]:
        """Location of each partition (as Glue holds it) by its values: all of them through
        ``GetPartitions`` pages of 1000 without column schemas, or those of ``values`` that exist
        through ``BatchGetPartition`` (1000 per call)."""
        target = f"{table.database}.{table.name}"
        found: dict[tuple[str, ...], str] = {}
        if values is None:
            token: str | None = None
            while True:
                params: dict[str, Any] = {"DatabaseName": table.database, "TableName": table.name,
                                          "MaxResults": PAGE_SIZE, "ExcludeColumnSchema": True}
                if token:
                    params["NextToken"] = token
                page = self._call("GetPartitions", target, **params) or {}
                self._collect(page.get("Partitions", ()), found)
                token = page.get("NextToken")
                if not token:
                    return found
        wanted = list(dict.fromkeys(tuple(v) for v in values))  # Glue refuses duplicate keys in one call
        for chunk in _chunks(wanted, GET_BATCH):
            keys = [{"Values": list(v)} for v in chunk]
            for attempt in range(UNPROCESSED_ROUNDS + 1):
                got = self._call("BatchGetPartition", target, DatabaseName=table.database,
                                 TableName=table.name, PartitionsToGet=keys) or {}
                self._collect(got.get("Partitions", ()), found)
                keys = list(got.get("UnprocessedKeys") or ())
                if not keys:
                    break
                if attempt == UNPROCESSED_ROUNDS:
                    raise HudiCatalogError(
                        f"Glue BatchGetPartition of {target} at {self.where} left {len(keys)} partitions "
                        f"unprocessed after {UNPROCESSED_ROUNDS + 1} calls (first {_shown(keys[0]['Values'])}); "
                        f"Glue is throttling: re-run the sync later")
                time.sleep(0.2 * 2 ** attempt)
        return found

    @staticmethod
    def _collect(partitions: Sequence[Mapping[str, Any]], into: dict[tuple[str, ...], str]) -> None:
        for p in partitions:
            into[tuple(p.get("Values") or ())] = str((p.get("StorageDescriptor") or {}).get("Location", ""))

    def add_partitions(self, table: TableEntry, partitions: Sequence[PartitionEntry]) -> None:
        """Register partitions with the table's descriptor at their locations, ``BatchCreatePartition``
        100 at a time. A partition that exists already counts as added. Every batch is sent; the
        partitions refused (by Glue, or by its limits before sending) are then raised together in a
        :class:`GluePartitionError`. A failure of a whole call (table gone, access denied, endpoint
        unreachable) raises at once: the batches after it would fail the same way."""
        target = f"{table.database}.{table.name}"
        failures, sendable = self._check(table, partitions)
        for chunk in _chunks(sendable, CREATE_BATCH):
            got = self._call("BatchCreatePartition", target, DatabaseName=table.database, TableName=table.name,
                             PartitionInputList=[_partition_input(table, p) for p in chunk]) or {}
            failures += self._refused(got.get("Errors"), "PartitionValues", ok=("AlreadyExistsException",))
        self._raise(failures, "BatchCreatePartition", target, len(partitions))

    def update_partitions(self, table: TableEntry, partitions: Sequence[PartitionEntry]) -> None:
        """Point partitions at new locations with the table's current descriptor,
        ``BatchUpdatePartition`` 100 at a time; an absent partition is refused (EntityNotFoundException)
        and reported with the others after every batch ran, as in :meth:`add_partitions`."""
        target = f"{table.database}.{table.name}"
        failures, sendable = self._check(table, partitions)
        for chunk in _chunks(sendable, UPDATE_BATCH):
            entries = [{"PartitionValueList": list(p.values), "PartitionInput": _partition_input(table, p)}
                       for p in chunk]
            got = self._call("BatchUpdatePartition", target, DatabaseName=table.database, TableName=table.name,
                             Entries=entries) or {}
            failures += self._refused(got.get("Errors"), "PartitionValueList", ok=())
        self._raise(failures, "BatchUpdatePartition", target, len(partitions))

    def drop_partitions(self, table: TableEntry, values: Sequence[tuple[str, ...]]) -> None:
        """Remove partitions, ``BatchDeletePartition`` 25 at a time; one already gone
        (EntityNotFoundException) counts as dropped. Other refusals are reported after every batch
        ran, as in :meth:`add_partitions`."""
        target = f"{table.database}.{table.name}"
        wanted = list(dict.fromkeys(tuple(v) for v in values))
        failures: list[PartitionFailure] = []
        for chunk in _chunks(wanted, DELETE_BATCH):
            got = self._call("BatchDeletePartition", target, DatabaseName=table.database, TableName=table.name,
                             PartitionsToDelete=[{"Values": list(v)} for v in chunk]) or {}
            failures += self._refused(got.get("Errors"), "PartitionValues", ok=("EntityNotFoundException",))
        self._raise(failures, "BatchDeletePartition", target, len(wanted))

    @staticmethod
    def _check(table: TableEntry, partitions: Sequence[PartitionEntry]
               ) -> tuple[list[PartitionFailure], list[PartitionEntry]]:
        """Partitions Glue's published limits refuse, and the others. botocore would refuse the whole
        batch for one bad value, so the bad ones are set aside and reported instead."""
        failures: list[PartitionFailure] = []
        sendable: list[PartitionEntry] = []
        keys = len(table.partition_keys)
        for p in partitions:
            if len(p.values) != keys:
                failures.append(PartitionFailure(p.values, "InvalidInputException",
                                                 f"{len(p.values)} values for {keys} partition keys (not sent)"))
            elif any(not v or len(v) > MAX_VALUE_CHARS for v in p.values):
                failures.append(PartitionFailure(p.values, "InvalidInputException",
                                                 f"a value is empty or longer than {MAX_VALUE_CHARS} characters, "
                                                 f"which Glue refuses (not sent)"))
            else:
                sendable.append(p)
        return failures, sendable

    @staticmethod
    def _refused(errors: Sequence[Mapping[str, Any]] | None, values_key: str, *, ok: tuple[str, ...]
                 ) -> list[PartitionFailure]:
        out = []
        for e in errors or ():
            detail = e.get("ErrorDetail") or {}
            code = str(detail.get("ErrorCode", ""))
            if code not in ok:
                out.append(PartitionFailure(tuple(e.get(values_key) or ()), code, str(detail.get("ErrorMessage", ""))))
        return out

    def _raise(self, failures: Sequence[PartitionFailure], api: str, target: str, total: int) -> None:
        if not failures:
            return
        named = "; ".join(f"{_shown(f.values)}: {f.code}: {f.message}" for f in failures[:NAMED_FAILURES])
        more = f" (and {len(failures) - NAMED_FAILURES} more)" if len(failures) > NAMED_FAILURES else ""
        raise GluePartitionError(
            f"Glue {api} of {target} at {self.where}: {len(failures)} of {total} partitions refused: {named}{more}. "
            f"The other partitions were written; fix the cause and re-run the sync (it redoes only what the "
            f"catalog lacks)", failures)
