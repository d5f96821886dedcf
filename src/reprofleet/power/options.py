"""Typed access to a ``pdu:`` block's options, with errors a user can act on.

Every key of an inventory's ``pdu:`` block other than driver/address/outlet/credentials
lands in ``PowerPort.options``. A misspelt option (``setle_s``) silently falling back to a
default is how a cycle ends up too short, so unknown keys are refused, listing the known.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from reprofleet.errors import PowerError

# Options every driver understands (see settings.DriverSettings).
COMMON_OPTIONS = ("timeout_s", "connect_timeout_s", "settle_s", "tries", "poll_s", "backoff_s", "backoff_cap_s",
                  "stagger_on", "stagger_window_s")


MAX_NUMBER = 1e6  # a timeout, a wait, a watt reading's ceiling: past it, a typo (or .inf)
MAX_INTEGER = 10**9  # tries, ports, outlets


class PowerConfigError(PowerError):
    """A ``pdu:`` block is wrong (unknown driver or option, bad value, missing outlet).

    ``field`` names the block's key at fault (``pdu_id``), so the preflight's line says
    ``file:line:pdu.pdu_id`` and not only the block.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class Options:
    """The options of one ``pdu:`` block, checked against the keys its driver knows."""

    def __init__(self, raw: Mapping[str, Any], where: str, known: Iterable[str]) -> None:
        self.raw = dict(raw)
        self.where = where
        self.known = tuple(dict.fromkeys((*COMMON_OPTIONS, *known)))
        unknown = sorted(set(self.raw) - set(self.known))
        if unknown:
            raise PowerConfigError(
                f"{where}: unknown pdu option(s) {', '.join(unknown)}; this driver knows: {', '.join(self.known)}"
            )

    def _bad(self, name: str, wanted: str) -> PowerConfigError:
        return PowerConfigError(f"{self.where}: pdu option {name} must be {wanted}, got {self.raw[name]!r}")

    def has(self, name: str) -> bool:
        return self.raw.get(name) is not None

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self._bad(name, "a string")
        return str(value)

    def required_text(self, name: str, why: str) -> str:
        value = self.text(name)
        if not value:
            raise PowerConfigError(f"{self.where}: pdu option {name} is required ({why})")
        return value

    def number(self, name: str, default: float, minimum: float = 0.0, maximum: float = MAX_NUMBER) -> float:
        """A finite number in [minimum, maximum]: NaN, ``.inf`` and 10**100 are refused."""
        value = self.raw.get(name)
        if value is None:
            return default
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise self._bad(name, "a number") from None
        if isinstance(value, bool) or not math.isfinite(number) or not minimum <= number <= maximum:
            raise self._bad(name, f"a finite number >= {minimum:g} and <= {maximum:g}")
        return number

    def integer(self, name: str, default: int, minimum: int = 0, maximum: int = MAX_INTEGER) -> int:
        value = self.raw.get(name)
        if value is None:
            return default
        text = str(value).strip() if not isinstance(value, bool) else ""
        if not text.lstrip("-").isdigit() or len(text) > 19 or not minimum <= int(text) <= maximum:
            raise self._bad(name, f"an integer >= {minimum} and <= {maximum}")
        return int(text)

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw.get(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered in ("true", "yes", "on", "1"):
            return True
        if lowered in ("false", "no", "off", "0"):
            return False
        raise self._bad(name, "true or false")

    def choice(self, name: str, choices: Sequence[str], default: str | None) -> str | None:
        value = self.text(name, default)
        if value is not None and value not in choices:
            raise self._bad(name, f"one of {', '.join(choices)}")
        return value
