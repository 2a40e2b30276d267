"""Every benchmark still runs: each ``bench`` module imports, and each one has a quick mode.

A benchmark is a measurement, not a test, so nothing here looks at its figures; but a bench
that no longer imports or crashes on its first step is found here rather than by the next
person who wants a figure. The cheap quick modes run in full (a few seconds of CPU in all:
``redaction``, ``media``, ``bench.storage_core`` on SQLite, ``bench.transport``); the ones that
start the real bot process and wait on the API's real 60 s window (``burst``, ``rate``,
``batch``, ``scale``) or seed a big ledger (``dashboard``) are imported and their quick mode's
signature checked only (docs/testing.md, "Benchmarks").
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH_MODULES = sorted(
    "bench" if path.stem == "__init__" else f"bench.{path.stem}"
    for path in (ROOT / "bench").glob("*.py")
)
STANDALONE = ("bench.storage_core", "bench.transport")
"""Benchmarks with a ``main`` of their own (``python -m bench.<name>``), beside the scenarios."""


@pytest.mark.parametrize("name", BENCH_MODULES)
def test_every_bench_module_imports(name: str) -> None:
    importlib.import_module(name)


def test_every_scenario_has_a_quick_mode() -> None:
    from bench.__main__ import SCENARIOS

    lacking = [n for n, f in SCENARIOS.items() if "quick" not in inspect.signature(f).parameters]
    assert lacking == []


@pytest.mark.parametrize("name", STANDALONE)
def test_every_standalone_bench_has_a_quick_mode(name: str) -> None:
    module = importlib.import_module(name)
    assert "--quick" in inspect.getsource(module.main)


@pytest.mark.parametrize("scenario", ["redaction", "media"])
def test_cheap_scenarios_run_quick(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main

    assert main([scenario, "--quick"]) == 0
    out = capsys.readouterr().out
    assert f"running {scenario} (quick)" in out
    assert "scenario wall time" in out


def test_storage_core_runs_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.storage_core import main

    main(["--engine", "sqlite", "--quick"])
    assert "| job by id | core |" in capsys.readouterr().out


def test_transport_runs_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.transport import main

    assert main(["--quick"]) == 0
    assert "httpx-aiohttp" in capsys.readouterr().out
