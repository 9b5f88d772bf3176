"""The option registry: every ``hoodie.*`` option pyhudi understands, declared once.

Users of Apache Hudi already know these keys; they must mean here what they mean there, with the
same defaults. Each :class:`ConfigOption` carries its key, default, documentation, the aliases Hudi
accepts (older keys and the short forms of Hudi's Spark SQL such as ``primaryKey``) and a parser
that turns the user's value into a typed one or fails with a :class:`HudiConfigError` naming the key.

:class:`HudiConfig` is the resolved view of one call's options: aliases folded to canonical keys,
unknown ``hoodie.*`` keys reported with the closest known key, values parsed on first access.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pyhudi.errors import HudiConfigError

T = TypeVar("T")

MB = 1024 * 1024


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


@dataclass
class HudiConfig:
    """One call's options, resolved against the registry.

    Unknown ``hoodie.*`` keys produce a warning naming the closest known key (users mistype long
    keys; silently ignoring them hides the mistake). Keys outside ``hoodie.*`` (``path``, Spark
    options) are kept and ignored.
    """

    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Mapping[str, Any] | None, *, warn_unknown: bool = True) -> HudiConfig:
        resolved: dict[str, Any] = {}
        for key, value in (options or {}).items():
            canon = canonical_key(str(key))
            if canon not in REGISTRY and canon.startswith("hoodie.") and warn_unknown:
                close = difflib.get_close_matches(canon, list(REGISTRY), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                warnings.warn(f"unknown option {key}{hint}", UserWarning, stacklevel=3)
            if canon in resolved and resolved[canon] != value and canon != key:
                continue  # the canonical spelling given alongside an alias wins
            resolved[canon] = value
        config = cls(resolved)
        for key in resolved:  # parse eagerly so a bad value fails before any work starts
            if key in REGISTRY:
                config.get(REGISTRY[key])
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
