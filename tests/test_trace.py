"""``python -m tools.trace`` still follows ``/video`` from its cog to the ledger row.

The figures are a measurement over docs/architecture.md's layers, not asserted here;
what is held is that the trace still reaches the charge's row, so a refactoring that leaves
the tool unable to follow the code is seen at once.
"""

from __future__ import annotations

import pytest

from tools.trace import DEFAULT_ENTRY, DEFAULT_TARGET, LAYERS, Index, layer, main, trace


def test_the_video_trace_reaches_the_ledger_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "(reached)" in out
    assert "files entered:" in out
    assert "returns to a higher layer:" in out


def test_the_route_runs_from_the_cog_down_to_storage() -> None:
    result = trace(Index(), DEFAULT_ENTRY, DEFAULT_TARGET)
    assert result.reached[0] == DEFAULT_ENTRY
    assert result.reached[-1] == DEFAULT_TARGET
    assert layer("cogs.video") == 0
    assert layer("bot.storage.repos.ledger") == next(
        i for i, names in enumerate(LAYERS) if "bot.storage" in names
    )
