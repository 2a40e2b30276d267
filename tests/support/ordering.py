"""The order the modules run in: the heaviest first (``tests/conftest.py`` applies it)."""

from __future__ import annotations

import pytest

HEAVIEST: tuple[str, ...] = (
    "tests/e2e/test_private_cards_e2e.py",
    "tests/e2e/test_delivery_e2e.py",
    "tests/e2e/test_dashboard_e2e.py",
    "tests/test_first_run.py",
    "tests/e2e/test_queue_e2e.py",
    "tests/e2e/test_personal_e2e.py",
    "tests/e2e/test_scale_e2e.py",
    "tests/e2e/test_sequences_e2e.py",
    "tests/jobs/test_poller.py",
    "tests/e2e/test_settlement_e2e.py",
    "tests/e2e/test_commands_e2e.py",
    "tests/storage/test_storage.py",
    "tests/services/test_generation.py",
    "tests/e2e/test_safety_e2e.py",
    "tests/services/test_settlement.py",
    "tests/e2e/test_task_identity_e2e.py",
    "tests/services/test_billing.py",
    "tests/e2e/test_cards_e2e.py",
    "tests/e2e/test_chat_e2e.py",
    "tests/e2e/test_shutdown_e2e.py",
    "tests/e2e/test_keys_e2e.py",
    "tests/services/test_creative.py",
    "tests/e2e/test_outage_e2e.py",
    "tests/services/test_key_changes.py",
)
"""The modules that took longest in a measured run (``--durations=0``, summed per module,
2026-12-07: 103 s down to 26 s), started first, longest first."""


def longest_first(items: list[pytest.Item]) -> None:
    """Order the modules by the work they are likely to hold, the heaviest first (in place).

    ``--dist loadfile`` hands whole modules to the workers in collection order, so a long
    end-to-end module collected last decides when the run ends. A module's weight is its
    end-to-end tests (a bot process each scenario waits on), then its tests with a server or a
    subprocess; a module's own tests keep their order, and equal weights keep the tree's.
    """
    weight: dict[str, int] = {}
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        gain = 10 if "e2e" in marks else 1 if marks & {"pg", "proc"} else 0
        weight[item.nodeid.split("::")[0]] = weight.get(item.nodeid.split("::")[0], 0) + gain
    first = {
        module: i for i, module in enumerate(dict.fromkeys(i.nodeid.split("::")[0] for i in items))
    }
    for rank, module in enumerate(HEAVIEST):
        if module in weight:
            weight[module] = 10_000 - rank
    items.sort(key=lambda i: (-weight[i.nodeid.split("::")[0]], first[i.nodeid.split("::")[0]]))


def no_reordering(config: pytest.Config) -> None:
    """Keep pytest-xdist from reordering the modules by their number of tests (its default
    with ``--dist loadfile``), which would start the end-to-end modules, with few but long
    tests, after the unit modules and undo :func:`longest_first`."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
