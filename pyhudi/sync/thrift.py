"""A small Thrift client: the binary protocol over a plain TCP socket, as the Hive metastore speaks it.

The Hive metastore's default transport is the strict binary protocol (version ``0x80010000``) on a
buffered, unframed socket without SASL. Writing a request needs each field's id and type, so the
caller describes arguments with :class:`Field` and the type constants below; reading needs no
schema because the binary protocol puts every value's type on the wire, so replies decode
generically into dictionaries keyed by field id (the caller names the fields it knows and any other
field, such as one a newer server added, is simply ignored).

This saves pyhudi a dependency on the ``thrift`` package and on generated metastore bindings for
the dozen calls catalog sync makes.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyhudi.sync.catalog import HudiCatalogError

__all__ = ["BOOL", "BYTE", "DOUBLE", "I16", "I32", "I64", "LIST", "MAP", "SET", "STRING", "STRUCT",
           "Field", "ListOf", "MapOf", "ThriftApplicationError", "ThriftClient", "ThriftTransportError",
           "decode_struct", "encode_call", "encode_struct", "string_map"]

# Wire type ids of the binary protocol.
STOP, BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST = 0, 2, 3, 4, 6, 8, 10, 11, 12, 13, 14, 15
_CALL, _REPLY, _EXCEPTION, _ONEWAY = 1, 2, 3, 4
_VERSION_1 = 0x80010000
_VERSION_MASK = 0xFFFF0000
_MAX_CONTAINER = 50_000_000  # a length beyond this means a broken stream, not a real reply


@dataclass(frozen=True)
class ListOf:
    """Type of a list (or set, with ``wire=SET``) whose elements have type ``element``."""

    element: TypeSpec
    wire: int = LIST


@dataclass(frozen=True)
class MapOf:
    """Type of a map from ``key`` to ``value``."""

    key: TypeSpec
    value: TypeSpec


#: A value's type for encoding: a wire type id for scalars and structs (a struct value is a sequence
#: of :class:`Field`), or a container description.
TypeSpec = int | ListOf | MapOf


@dataclass(frozen=True)
class Field:
    """One field to encode: id, type and value (``None`` leaves the field out, as Thrift does with
    unset optional fields)."""

    id: int
    type: TypeSpec
    value: Any


class ThriftTransportError(HudiCatalogError):
    """The server could not be reached, closed the connection or sent bytes that are not a reply."""


class ThriftApplicationError(HudiCatalogError):
    """The server answered with a ``TApplicationException`` (unknown method, internal error...)."""

    def __init__(self, message: str, kind: int) -> None:
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------------------------------------
# Encoding


def _write_value(out: bytearray, spec: TypeSpec, value: Any) -> None:
    if isinstance(spec, ListOf):
        elem_wire = _wire(spec.element)
        out += struct.pack("!bi", elem_wire, len(value))
        for item in value:
            _write_value(out, spec.element, item)
    elif isinstance(spec, MapOf):
        out += struct.pack("!bbi", _wire(spec.key), _wire(spec.value), len(value))
        for k, v in value.items():
            _write_value(out, spec.key, k)
            _write_value(out, spec.value, v)
    elif spec == STRING:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        out += struct.pack("!i", len(data))
        out += data
    elif spec == STRUCT:
        out += encode_struct(value)
    elif spec == BOOL:
        out.append(1 if value else 0)
    elif spec == BYTE:
        out += struct.pack("!b", value)
    elif spec == I16:
        out += struct.pack("!h", value)
    elif spec == I32:
        out += struct.pack("!i", value)
    elif spec == I64:
        out += struct.pack("!q", value)
    elif spec == DOUBLE:
        out += struct.pack("!d", value)
    else:
        raise ValueError(f"cannot encode thrift type {spec!r}")


def _wire(spec: TypeSpec) -> int:
    if isinstance(spec, ListOf):
        return spec.wire
    if isinstance(spec, MapOf):
        return MAP
    return spec


def encode_struct(fields: Sequence[Field]) -> bytes:
    """The binary encoding of a struct made of ``fields`` (``None`` values skipped), STOP included."""
    out = bytearray()
    for f in fields:
        if f.value is None:
            continue
        out += struct.pack("!bh", _wire(f.type), f.id)
        _write_value(out, f.type, f.value)
    out.append(STOP)
    return bytes(out)


def encode_call(method: str, seqid: int, args: Sequence[Field]) -> bytes:
    """A strict CALL message: header, then the arguments struct."""
    name = method.encode("utf-8")
    return struct.pack("!Ii", _VERSION_1 | _CALL, len(name)) + name + struct.pack("!i", seqid) + encode_struct(args)


# ---------------------------------------------------------------------------------------------
# Decoding


class _Reader:
    """Reads exact byte counts from a source: a socket's buffered file or an in-memory buffer."""

    def __init__(self, read) -> None:
        self._read = read

    def take(self, n: int) -> bytes:
        data = self._read(n)
        if len(data) != n:
            raise ThriftTransportError(f"the connection closed in the middle of a reply ({len(data)} of {n} bytes)")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def length(self) -> int:
        n = self.unpack("!i")
        if n < 0 or n > _MAX_CONTAINER:
            raise ThriftTransportError(f"a reply holds an impossible length {n}: the stream is not thrift binary")
        return int(n)


def _read_value(r: _Reader, wire: int) -> Any:
    if wire == STRING:
        data = r.take(r.length())
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # a binary field: hand back the bytes
    if wire == STRUCT:
        return _read_struct(r)
    if wire in (LIST, SET):
        elem = r.unpack("!b")
        return [_read_value(r, elem) for _ in range(r.length())]
    if wire == MAP:
        kt, vt = r.unpack("!b"), r.unpack("!b")
        n = r.length()
        out = {}
        for _ in range(n):
            k = _read_value(r, kt)
            out[k] = _read_value(r, vt)
        return out
    if wire == BOOL:
        return r.unpack("!b") != 0
    if wire == BYTE:
        return r.unpack("!b")
    if wire == I16:
        return r.unpack("!h")
    if wire == I32:
        return r.unpack("!i")
    if wire == I64:
        return r.unpack("!q")
    if wire == DOUBLE:
        return r.unpack("!d")
    raise ThriftTransportError(f"a reply holds unknown thrift type {wire}: the stream is not thrift binary")


def _read_struct(r: _Reader) -> dict[int, Any]:
    out: dict[int, Any] = {}
    while True:
        wire = r.unpack("!b")
        if wire == STOP:
            return out
        fid = r.unpack("!h")
        out[fid] = _read_value(r, wire)


def decode_struct(data: bytes) -> dict[int, Any]:
    """A struct's fields by id, from its binary encoding (lists and sets as lists, maps as dicts,
    nested structs as dicts, strings as str or bytes when not UTF-8)."""
    view = memoryview(data)
    pos = 0

    def read(n: int) -> bytes:
        nonlocal pos
        chunk = bytes(view[pos:pos + n])
        pos += len(chunk)
        return chunk

    return _read_struct(_Reader(read))


# ---------------------------------------------------------------------------------------------
# The client


class ThriftClient:
    """Calls on one connection to the first reachable of ``endpoints`` (host, port), in order.

    The connection opens at the first call. A call that finds the connection broken (the server
    restarted, an idle connection was cut) reconnects once and sends the call again, as Hive's own
    retrying client does; a timeout is not retried, since the server may still be working on it.
    Not thread-safe: one call at a time.
    """

    def __init__(self, endpoints: Sequence[tuple[str, int]], *, timeout: float = 60.0) -> None:
        if not endpoints:
            raise ValueError("no thrift endpoint given")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.endpoint: tuple[str, int] | None = None  # the one connected to
        self._sock: socket.socket | None = None
        self._file: Any = None
        self._seqid = 0

    def _connect(self) -> None:
        failures = []
        for host, port in self.endpoints:
            try:
                sock = socket.create_connection((host, port), timeout=self.timeout)
            except OSError as e:
                failures.append(f"{host}:{port}: {e}")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock, self._file, self.endpoint = sock, sock.makefile("rb"), (host, port)
            return
        raise ThriftTransportError("cannot connect to " + "; ".join(failures))

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        if self._file is not None:
            self._file.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._file = self.endpoint = None

    def call(self, method: str, args: Sequence[Field]) -> dict[int, Any]:
        """Send ``method(args)`` and return the reply's result struct by field id: 0 is the return
        value (absent for void methods), 1.. the declared exceptions the server raised."""
        for attempt in (1, 2):
            fresh = self._sock is None
            if fresh:
                self._connect()
            try:
                return self._exchange(method, args)
            except TimeoutError as e:
                self.close()
                raise ThriftTransportError(f"{method}: no answer within {self.timeout:g} s from "
                                           f"{self._where()}") from e
            except (OSError, ThriftTransportError) as e:
                self.close()
                if attempt == 2 or fresh:
                    raise ThriftTransportError(f"{method}: connection to {self._where()} failed: {e}") from e
        raise AssertionError("unreachable")

    def _where(self) -> str:
        return ", ".join(f"{h}:{p}" for h, p in self.endpoints)

    def _exchange(self, method: str, args: Sequence[Field]) -> dict[int, Any]:
        assert self._sock is not None
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        self._sock.sendall(encode_call(method, self._seqid, args))
        r = _Reader(self._file.read)
        head = r.unpack("!i")
        if head < 0:
            if (head & _VERSION_MASK) != _VERSION_1:
                raise ThriftTransportError(f"bad protocol version {head & 0xFFFFFFFF:#x} in the reply")
            kind = head & 0xFF
            name = r.take(r.length()).decode("utf-8", "replace")
        else:  # an old, non-strict server: the name comes first
            if head > _MAX_CONTAINER:
                raise ThriftTransportError(f"a reply holds an impossible length {head}: not thrift binary")
            name = r.take(head).decode("utf-8", "replace")
            kind = r.unpack("!b")
        seqid = r.unpack("!i")
        body = _read_struct(r)
        if kind == _EXCEPTION:
            raise ThriftApplicationError(f"{method}: the server failed: {body.get(1, '')}", int(body.get(2, 0)))
        if kind != _REPLY or name != method or seqid != self._seqid:
            raise ThriftTransportError(f"{method}: unexpected reply {name!r} (type {kind}, seqid {seqid})")
        return body

    def __enter__(self) -> ThriftClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def string_map(value: Mapping[str, str] | None) -> dict[str, str]:
    """A decoded ``map<string,string>`` as a plain dict of str (absent → empty)."""
    return {str(k): str(v) for k, v in (value or {}).items()}
