"""Numbers as the tools show them: sizes, times, percentages (and long names cut to fit).
One place for every widget, the command line and the sentences analyses write
(`compare`'s summary)."""

from __future__ import annotations

import math

MIB = 2**20


def shorten(text: str, n: int) -> str:
    """`text` cut to `n` characters, the last an ellipsis, where it is longer."""
    return text if len(text) <= n else text[: n - 1] + "…"


def _missing(x: float | None) -> bool:
    return x is None or not math.isfinite(x)


def size(n: float) -> str:
    """A size in its own unit, for tables and cards: 512 B, 12.5 KiB, 930.29 MiB, 15.000 GiB."""
    n = int(n)
    if abs(n) < 2**10:
        return f"{n} B"
    if abs(n) < 2**20:
        return f"{n / 2**10:,.1f} KiB"
    if abs(n) < 2**30:
        return f"{n / 2**20:,.2f} MiB"
    return f"{n / 2**30:,.3f} GiB"


def size_short(n: float | None) -> str:
    """A size to four significant digits, for sentences: 1.234 GiB, 12 KiB; "n/a" when unknown."""
    if n is None or _missing(n):
        return "n/a"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{int(n)} B"


def number(x: float | None, spec: str, missing: str = "–") -> str:
    """A number as `spec` formats it (".2f"); `missing` where it is unknown (None, NaN)."""
    return missing if x is None or _missing(x) else format(x, spec)


def mib(n: float) -> str:
    """Bytes in MiB, two decimals: the memory viewer's unit (as XProf's)."""
    return f"{n / MIB:,.2f} MiB"


def percent(fraction: float | None, digits: int = 2) -> str:
    """A fraction as a percentage; "n/a" where it is unknown (e.g. no known peak)."""
    return "n/a" if fraction is None or _missing(fraction) else f"{100 * fraction:.{digits}f} %"


def change(ratio: float | None, prefix: str = " (", suffix: str = ")") -> str:
    """A ratio b / a as a signed percent change, " (+12.5 %)"; empty when unknown."""
    return "" if ratio is None or _missing(ratio) else f"{prefix}{100 * (ratio - 1):+.1f} %{suffix}"


def ms(ps: float) -> str:
    """Picoseconds in milliseconds: 1,234.567 ms."""
    return f"{ps / 1e9:,.3f} ms"


def duration(ps: float | None, missing: str = "n/a", ms_from: float = 1e9) -> str:
    """Picoseconds in ms from `ms_from` ps up (default 1 ms), else in µs."""
    if ps is None or _missing(ps):
        return missing
    return f"{ps / 1e9:,.3f} ms" if abs(ps) >= ms_from else f"{ps / 1e6:,.3f} µs"
