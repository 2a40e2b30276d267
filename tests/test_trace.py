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


def test_the_default_route_is_the_plain_video_one_call_per_layer() -> None:
    """The trace describes ``/video`` without Enhance: the service puts the common path first.

    The cog makes one call (the flow's), the flow one service call, and the settlement is one
    repository call: the route enters each layer once, by one call.
    """
    result = trace(Index(), DEFAULT_ENTRY, DEFAULT_TARGET)
    assert "bot.services.creative:CreativeService.enhance" not in result.reached
    assert result.reached[:4] == [
        DEFAULT_ENTRY,
        "bot.discord.command_flows:video_command",
        "bot.services.submissions:SubmissionService.video_command",
        "bot.services.submissions:SubmissionService.video",
    ]
    assert result.reached[-2] == "bot.storage.repos.ledger:LedgerStore.settle"
    cog_calls = [callee for caller, callee in result.steps if caller == DEFAULT_ENTRY]
    assert cog_calls == ["bot.discord.command_flows:video_command"]
