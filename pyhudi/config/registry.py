"""The option registry: every ``hoodie.*`` option pyhudi understands, declared once.

Users of Apache Hudi already know these keys; they must mean here what they mean there, with the
same defaults. Each :class:`ConfigOption` carries its key, default, documentation, the aliases Hudi
accepts (older keys and the short forms of Hudi's Spark SQL such as ``primaryKey``) and a parser
that turns the user's value into a typed one or fails with a :class:`HudiConfigError` naming the key.

:class:`HudiConfig` is the resolved view of one call's options: aliases folded to canonical keys,
Apache Hudi options pyhudi does not implement refused, keys that are no Hudi option at all (typos)
reported with the closest known key, values parsed eagerly.

Which keys are Apache Hudi's is read from ``hudi_keys.txt`` beside this module (the key names of
Hudi 1.x, how they were gathered is noted in the file): without it a ``hoodie.table.cdc.enabled``
could only be warned about as unknown, and the write would go on without change data.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Generic, TypeVar

from pyhudi.errors import HudiConfigError, HudiUnsupportedOptionError

T = TypeVar("T")

MB = 1024 * 1024


class Unimplemented(ValueError):
    """Raised by a parser for a value Apache Hudi accepts but pyhudi does not implement; the option
    then fails with :class:`HudiUnsupportedOptionError` rather than a plain invalid-value error."""


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def parse_non_negative_int(value: Any) -> int:
    number = parse_int(value)
    if number < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return number


def parse_positive_int(value: Any) -> int:
    number = parse_int(value)
    if number <= 0:
        raise ValueError(f"expected an integer > 0, got {value!r}")
    return number


def parse_float(value: Any) -> float:
    return float(str(value).strip())


def parse_str(value: Any) -> str:
    return str(value)


def parse_fields(value: Any) -> tuple[str, ...]:
    """A comma-separated field list, as Hudi accepts for key and partition fields."""
    if isinstance(value, (list, tuple)):
        parts = [str(v) for v in value]
    else:
        parts = str(value).split(",")
    return tuple(p.strip() for p in parts if p.strip())


def choice(*allowed: str, mapping: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    """A parser for an enumerated option: case-insensitive, normalised to upper case."""
    extra = {k.upper(): v for k, v in (mapping or {}).items()}

    def parse(value: Any) -> str:
        text = str(value).strip().upper()
        if text in extra:
            return extra[text]
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text

    return parse


def class_choice(what: str, known: tuple[str, ...]) -> Callable[[Any], str]:
    """A parser for a Java class option: the full or the simple class name of one of ``known``."""
    def parse(value: Any) -> str:
        text = str(value).strip()
        for name in known:
            if text in (name, name.rsplit(".", 1)[1]):
                return name
        raise ValueError(f"{what} {text!r} is not supported; use one of "
                         + ", ".join(k.rsplit(".", 1)[1] for k in known))

    return parse


def only(*implemented: str, hudi_accepts: str) -> Callable[[Any], str]:
    """A parser for an option of which pyhudi implements some of the values Hudi accepts.

    ``implemented`` values pass (case-insensitive, returned as listed); any other value is refused
    naming what pyhudi implements, ``hudi_accepts`` saying what else Hudi would take, so the user
    sees the value is valid Hudi but needs Hudi's own writer.
    """
    by_upper = {v.upper(): v for v in implemented}
    listed = " or ".join(implemented) if len(implemented) < 3 else \
        ", ".join(implemented[:-1]) + " or " + implemented[-1]

    def parse(value: Any) -> str:
        text = str(value).strip()
        if text.upper() in by_upper:
            return by_upper[text.upper()]
        raise Unimplemented(f"pyhudi implements only {listed}, not {text!r} (Apache Hudi also accepts {hudi_accepts})")

    return parse


def implemented_choice(implemented: Sequence[str], *, hudi_only: Sequence[str]) -> Callable[[Any], str]:
    """A parser for an enumerated option of which pyhudi implements ``implemented`` and Apache
    Hudi also accepts ``hudi_only``: the one statement of what pyhudi supports, so such a value is
    refused where options are read (:class:`HudiUnsupportedOptionError`), before anything runs.
    A value of neither list is invalid (:class:`HudiConfigError`). Case-insensitive, upper case."""
    known = choice(*implemented, *hudi_only)
    refuse = only(*implemented, hudi_accepts=", ".join(hudi_only[:-1]) + " and " + hudi_only[-1]
                  if len(hudi_only) > 1 else hudi_only[0])

    def parse(value: Any) -> str:
        return refuse(known(value))

    return parse


def only_false(*, hudi_does: str) -> Callable[[Any], bool]:
    """A parser for a Hudi switch whose feature pyhudi does not implement: false passes, true is
    refused saying what Hudi would do with it (``hudi_does``)."""
    def parse(value: Any) -> bool:
        if parse_bool(value):
            raise Unimplemented(f"pyhudi implements only false, not {value!r} (with true Apache Hudi {hudi_does})")
        return False

    return parse


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One option: canonical key, default (``None`` = unset), doc, aliases, parser."""

    key: str
    default: T | None
    doc: str
    parser: Callable[[Any], T]
    aliases: tuple[str, ...] = ()

    def parse(self, value: Any) -> T:
        try:
            return self.parser(value)
        except Unimplemented as exc:
            raise HudiUnsupportedOptionError(f"{self.key}={value}: {exc}; remove the option or set a value "
                                             "pyhudi implements") from None
        except (TypeError, ValueError) as exc:
            raise HudiConfigError(f"invalid value for {self.key}: {exc}") from None


REGISTRY: dict[str, ConfigOption[Any]] = {}
_ALIASES: dict[str, str] = {}


def option(
    key: str,
    default: Any,
    doc: str,
    parser: Callable[[Any], Any] = parse_str,
    aliases: tuple[str, ...] = (),
) -> ConfigOption[Any]:
    opt: ConfigOption[Any] = ConfigOption(key, default, doc, parser, aliases)
    if key in REGISTRY or key in _ALIASES:
        raise RuntimeError(f"option {key} declared twice")
    REGISTRY[key] = opt
    for alias in aliases:
        _ALIASES[alias] = key
    return opt


def canonical_key(key: str) -> str:
    """The registry key a user-supplied key (or alias) stands for; the key itself if unknown.

    Spark hands data source options over lower-cased, so a key matches in any case.
    """
    if key in REGISTRY:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    if not _BY_LOWER:
        _BY_LOWER.update({k.lower(): k for k in REGISTRY})
        _BY_LOWER.update({a.lower(): k for a, k in _ALIASES.items()})
    return _BY_LOWER.get(key.lower(), key)


_BY_LOWER: dict[str, str] = {}

#: Apache Hudi option keys pyhudi does not implement and why, named in the error (see :func:`unimplemented`).
UNIMPLEMENTED_WHY: dict[str, str] = {}


#: Steps that complete one call's resolved options from others (one Hudi option standing for a
#: setting of another, e.g. a record merge mode for a payload class); each may raise HudiConfigError.
DERIVED: list[Callable[[dict[str, Any]], None]] = []


@functools.cache
def hudi_keys() -> frozenset[str]:
    """Apache Hudi's option keys, lower-cased (Spark lower-cases data source options)."""
    text = resources.files("pyhudi.config").joinpath("hudi_keys.txt").read_text(encoding="utf-8")
    return frozenset(line.strip().lower() for line in text.splitlines()
                     if line.strip() and not line.startswith("#"))


def is_hudi_key(key: str) -> bool:
    """Whether ``key`` is one of Apache Hudi's option keys (in any case)."""
    return key.lower() in hudi_keys()


def unimplemented(key: str, value: Any) -> str:
    """The message for a Hudi option pyhudi does not implement."""
    why = UNIMPLEMENTED_WHY.get(key.lower(), "")
    return (f"pyhudi does not implement {key} (an Apache Hudi option){': ' + why if why else ''}; "
            f"remove it from the options (given: {key}={value}), or use Apache Hudi's own Spark bundle")


@dataclass
class HudiConfig:
    """One call's options, resolved against the registry.

    An Apache Hudi key pyhudi does not implement is an error (:class:`HudiUnsupportedOptionError`):
    going on without it would give a table or a result without what the option asked for. Other
    unknown ``hoodie.*`` keys, which no Hudi release has, produce a warning naming the closest known
    key (users mistype long keys; silently ignoring them hides the mistake). Keys outside
    ``hoodie.*`` (``path``, Spark options) are kept and ignored. ``warn_unknown=False`` checks no
    key: for options recorded by earlier writes, which are read, not acted on.
    """

    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Mapping[str, Any] | None, *, warn_unknown: bool = True) -> HudiConfig:
        resolved: dict[str, Any] = {}
        refused: list[str] = []
        given_as: dict[str, str] = {}  # the spelling the user gave, named in errors
        for key, value in (options or {}).items():
            canon = canonical_key(str(key))
            if canon not in REGISTRY and warn_unknown:
                if is_hudi_key(canon):
                    refused.append(unimplemented(str(key), value))
                elif canon.lower().startswith("hoodie."):
                    close = difflib.get_close_matches(canon, list(REGISTRY), n=1, cutoff=0.6)
                    hint = f"; did you mean {close[0]}?" if close else ""
                    warnings.warn(f"unknown option {key}{hint}", UserWarning, stacklevel=3)
            if canon in resolved and resolved[canon] != value and canon != key:
                continue  # the canonical spelling given alongside an alias wins
            resolved[canon] = value
            given_as[canon] = str(key)
        if refused:
            raise HudiUnsupportedOptionError("; ".join(refused))
        config = cls(resolved)
        for key in resolved:  # parse eagerly so a bad value fails before any work starts
            if key in REGISTRY:
                try:
                    config.get(REGISTRY[key])
                except HudiConfigError as exc:
                    if given_as.get(key, key) == key:
                        raise
                    raise type(exc)(f"{exc} (given as {given_as[key]})") from None
        for derive in DERIVED:
            derive(resolved)
        return config

    def is_set(self, opt: ConfigOption[Any]) -> bool:
        return opt.key in self.raw

    def get(self, opt: ConfigOption[T]) -> T:
        if opt.key in self.raw and self.raw[opt.key] is not None:
            return opt.parse(self.raw[opt.key])
        return opt.default  # type: ignore[return-value]

    def with_defaults(self, values: Mapping[str, Any]) -> HudiConfig:
        """A copy where ``values`` fill keys the user did not set (table properties, for instance)."""
        merged = dict(values)
        merged.update(self.raw)
        return HudiConfig(merged)


def describe_options() -> list[tuple[str, str, str]]:
    """(key, default, doc) of every option, for the CLI and docs."""
    return [(o.key, "" if o.default is None else str(o.default), o.doc) for o in REGISTRY.values()]
