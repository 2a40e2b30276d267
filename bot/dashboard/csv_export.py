"""The ledger as CSV: exact amounts, and no cell a spreadsheet would run as a formula.

Prompts are members' text: a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return is read as a formula by Excel, LibreOffice and Google Sheets (OWASP, "CSV Injection"),
so such a cell is written with a leading ``'``, which those programs show as text. Amounts come
from integer micro-cents (:func:`amount_cell`: a plain number, six decimals at least, more only
when the amount has them), so the column sums to the ledger's total exactly.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from bot.domain import AuditEntry, LedgerLine
from bot.services.dashboard import MICRO_PER_DOLLAR

LEDGER_COLUMNS: Final = (
    "time",
    "member_id",
    "member",
    "kind",
    "model",
    "job_id",
    "task_id",
    "amount_usd",
    "status",
    "prompt",
)
"""The header row of ``ledger.csv`` (``docs/dashboard.md``)."""


def amount_cell(micro: int) -> str:
    """Micro-cents as the CSV's ``amount_usd`` cell: an exact plain number, six decimals at least.

    A data cell a spreadsheet sums, not a figure for people (those are :func:`bot.i18n.money`'s):
    no symbol, no grouping, more decimals only when the amount has them (a micro-cent is 10**-8
    dollars): ``amount_cell(350_000) == "0.003500"``, ``amount_cell(-1) == "-0.00000001"``.
    """
    sign = "-" if micro < 0 else ""
    whole, frac = divmod(abs(micro), MICRO_PER_DOLLAR)
    digits = f"{frac:08d}".rstrip("0").ljust(6, "0")
    return f"{sign}{whole}.{digits}"


AUDIT_COLUMNS: Final = ("time", "member_id", "member", "setting", "old", "new", "via")
"""The header row of the audit log's CSV."""

FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")


def inert(cell: str) -> str:
    """Return ``cell`` so that no spreadsheet reads it as a formula (a leading ``'``)."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


@functools.lru_cache(maxsize=8)
def _day_prefix(day: int) -> str:
    return datetime.fromtimestamp(day * 86_400, UTC).strftime("%Y-%m-%dT")


def iso(at: float) -> str:
    """Return UTC epoch seconds as ISO 8601 in UTC, to the microsecond (``...Z``).

    An export writes a million of these in order, so the date is computed once a day and the
    time of day by integer arithmetic: ``iso(1767225600.5) == "2026-01-01T00:00:00.500000Z"``.
    """
    day, rest = divmod(round(at * 1_000_000), 86_400_000_000)
    seconds, micro = divmod(rest, 1_000_000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{_day_prefix(day)}{hours:02d}:{minutes:02d}:{seconds:02d}.{micro:06d}Z"


class CsvWriter:
    """Rows to CSV text, a batch at a time (one small buffer, reused)."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\r\n")

    def rows(self, rows: Iterable[Sequence[str]]) -> bytes:
        """Return ``rows`` as UTF-8 CSV; their cells must already be :func:`inert`."""
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerows(rows)
        return self._buffer.getvalue().encode("utf-8")


def ledger_rows(lines: Iterable[LedgerLine], names: Mapping[int, str]) -> list[list[str]]:
    """Return the CSV rows of ledger lines (:data:`LEDGER_COLUMNS`).

    Only the cells of free text (names, models, task ids, prompts) can start like a formula:
    they are made :func:`inert`; times, ids and amounts are ours.
    """
    return [
        [
            iso(line.at),
            str(line.user_id),
            inert(names.get(line.user_id, "")),
            line.kind,
            inert(line.model),
            "" if line.job_id is None else str(line.job_id),
            inert(line.task_id or ""),
            amount_cell(line.cost_micro),
            line.status,
            inert(line.prompt),
        ]
        for line in lines
    ]


def audit_rows(entries: Iterable[AuditEntry], names: Mapping[int, str]) -> list[list[str]]:
    """Return the CSV rows of audit entries (:data:`AUDIT_COLUMNS`), text cells inert."""
    return [
        [
            iso(e.at),
            str(e.user_id),
            inert(names.get(e.user_id, "")),
            inert(e.what),
            inert(e.old),
            inert(e.new),
            e.via,
        ]
        for e in entries
    ]
