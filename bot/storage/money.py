"""Money in storage: Decimal cents in Python, INTEGER micro-cents in the money columns.

Both engines store micro-cents, so that ``SUM()`` is exact in SQL (over ``REAL`` it is not; a
decimal text column cannot be summed at all). The conversion happens here and nowhere else
(``docs/storage.md``, "Money representation").
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Final

_MICRO_DIGITS: Final = 6
MICRO_PER_CENT: Final = 10**_MICRO_DIGITS
"""Units of the money columns per cent: a micro-cent, far below any price the spec shows."""


def to_micro(cents: Decimal | int) -> int:
    """Return ``cents`` as integer micro-cents, rounded *up* when finer than a micro-cent.

    Up, because a stored amount counts against budgets: it must never be less than what was
    charged. :func:`bot.services.billing.charge_anomaly` records the exact text of such a value.

    Raises:
        ValueError: ``cents`` is NaN or infinite.
    """
    if isinstance(cents, int):
        return cents * MICRO_PER_CENT  # exact, and 20 times faster (the guard's every charge)
    if isinstance(cents, Decimal) and not cents.is_finite():  # before: no ceiling of NaN
        raise ValueError(f"not a finite amount of cents: {cents}")
    cents = Decimal(cents)
    with localcontext() as ctx:
        # Enough digits that the shift never rounds: the ceiling must see every digit sent.
        ctx.prec = max(ctx.prec, len(cents.as_tuple().digits) + 8)
        return int(cents.scaleb(_MICRO_DIGITS).to_integral_value(rounding=ROUND_CEILING))


def from_micro(micro: int) -> Decimal:
    """Return integer micro-cents as exact Decimal cents (``350_000 -> Decimal("0.35")``)."""
    cents = Decimal(micro).scaleb(-_MICRO_DIGITS)  # exact: a shift of the decimal point
    return cents.to_integral_value() if cents == cents.to_integral_value() else cents.normalize()
