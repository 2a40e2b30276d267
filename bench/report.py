"""Plain-text tables, percentiles and a description of the machine."""

from __future__ import annotations

import math
import os
import platform
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path


def percentile(values: list[float], q: float) -> float:
    """Return the ``q``-th percentile (0..100) of ``values``, nearest-rank; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float) -> str:
    """Format seconds as milliseconds."""
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def secs(seconds: float) -> str:
    """Format seconds."""
    return "n/a" if math.isnan(seconds) else f"{seconds:.1f} s"


def ratio(ours: float, theirs: float) -> str:
    """Format ``ours / theirs``."""
    if theirs == 0 or math.isnan(ours) or math.isnan(theirs):
        return "n/a"
    return f"{ours / theirs:.2f}"


@dataclass
class Table:
    """One scenario's results: a header and rows of strings (by default metric, value, goal)."""

    title: str
    header: tuple[str, ...] = ("metric", "value", "goal / note")
    rows: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, metric: str, *values: object) -> None:
        cells = (metric, *(str(v) for v in values))
        self.rows.append(cells + ("",) * (len(self.header) - len(cells)))

    def render(self) -> str:
        widths = [
            max(len(r[i]) for r in [self.header, *self.rows]) for i in range(len(self.header))
        ]

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        out = [f"== {self.title} ==", line(self.header), line(tuple("-" * w for w in widths))]
        out += [line(r) for r in self.rows]
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def load_average() -> str:
    """The machine's load average over 1, 5 and 15 minutes (``os.getloadavg``), as text."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def machine() -> Table:
    """Describe where the figures were measured."""
    table = Table("machine")
    table.add("cpus (nproc)", os.cpu_count())
    table.add("cpu model", _cpu_model())
    table.add("ram", _ram_gib())
    table.add("os", platform.platform())
    table.add("python", sys.version.split()[0])
    table.add("date (UTC)", datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
    table.add("load average", load_average())
    return table
