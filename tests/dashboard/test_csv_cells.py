"""The CSV's cells: exact amounts, UTC times, and nothing a spreadsheet would run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.dashboard.csv_export import amount_cell, inert, iso
from bot.services.dashboard import usd


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("a red kite", "a red kite"),
        ("", ""),
    ],
)
def test_a_formula_looking_cell_is_written_as_text(cell: str, written: str) -> None:
    assert inert(cell) == written


def test_amounts_are_exact_with_six_decimals_at_least() -> None:
    assert amount_cell(350_000) == "0.003500"
    assert amount_cell(1) == "0.00000001"
    assert amount_cell(12_345_678_900) == "123.456789"
    assert amount_cell(0) == "0.000000"
    assert amount_cell(-1) == "-0.00000001"


def test_the_pages_show_the_same_amounts_exactly_through_the_one_money_formatter() -> None:
    assert usd(350_000) == "$0.0035"
    assert usd(100_000_000) == "$1.00"
    assert usd(1) == "$0.00000001"


@pytest.mark.parametrize(
    "at", [1_767_225_600.0, 1_767_225_600.5, 1_767_312_000.123456, 86_399.999999]
)
def test_times_are_utc_iso_8601_to_the_microsecond(at: float) -> None:
    expected = datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds")
    assert iso(at) == expected.replace("+00:00", "Z")
