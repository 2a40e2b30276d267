"""``python -m bench [burst|rate|batch|scale|media|safety|redaction|dashboard|dashboard-abuse|
guard|thumbs|all] [--quick]``: run benchmarks.

``scale`` also takes ``--engine sqlite|postgresql|both`` and ``--workers 0,1,2,4`` (0: the
single process; N: one gateway process plus N ``python -m bot worker`` processes), and
``--jobs``, ``--guilds``, ``--keys`` (default 10,000, 1,000, 200).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import (
    batch,
    burst,
    dashboard,
    dashboard_abuse,
    guard,
    media,
    rate,
    redaction,
    safety,
    scale,
    thumbs,
)
from bench.report import Table, machine

Scenario = Callable[..., Awaitable[Table | list[Table]]]
SCENARIOS: dict[str, Scenario] = {
    "burst": burst.run,
    "rate": rate.run,
    "batch": batch.run,
    "scale": scale.run,
    "media": media.run,
    "safety": safety.run,
    "redaction": redaction.run,
    "dashboard": dashboard.run,
    "dashboard-abuse": dashboard_abuse.run,
    "guard": guard.run,
    "thumbs": thumbs.run,
}


async def _main(
    names: list[str], *, quick: bool, keep: Path | None, scale_options: dict[str, Any]
) -> None:
    print(machine().render(), flush=True)
    with tempfile.TemporaryDirectory(prefix="genbot-bench-") as tmp:
        root = keep or Path(tmp)
        for name in names:
            workdir = root / name
            workdir.mkdir(parents=True, exist_ok=True)
            began = time.monotonic()
            print(f"\nrunning {name}{' (quick)' if quick else ''}...", flush=True)
            extra = scale_options if name == "scale" else {}
            result = await SCENARIOS[name](workdir, quick=quick, **extra)
            tables = result if isinstance(result, list) else [result]
            tables[-1].notes.append(f"scenario wall time {time.monotonic() - began:.0f} s")
            print("\n\n".join(t.render() for t in tables), flush=True)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not counts or min(counts) < 0:
        raise argparse.ArgumentTypeError("worker counts are 0 or more, e.g. 0,1,2,4")
    return counts


def _positive(text: str) -> int:
    try:
        number = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError("a count is 1 or more")
    return number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenario", nargs="?", default="all", choices=[*SCENARIOS, "all"])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the bot logs and databases in this folder"
    )
    parser.add_argument(
        "--engine",
        choices=["sqlite", "postgresql", "both"],
        default="both",
        help="scale: the database engine(s); PostgreSQL needs its Debian binaries (pg_ctl)",
    )
    parser.add_argument(
        "--workers",
        type=_counts,
        default=None,
        help="scale: comma-separated worker counts, 0 = one process "
        "(default: 0 on SQLite; 0,1,2,4 on PostgreSQL)",
    )
    parser.add_argument(
        "--touch-cap",
        type=float,
        default=None,
        help="scale: seconds to wait for every job's first poll before projecting",
    )
    parser.add_argument(
        "--window", type=float, default=None, help="scale: seconds of the steady window"
    )
    for name, what in (
        ("jobs", "pending jobs seeded (default 10,000"),
        ("guilds", "guilds they belong to (default 1,000"),
        ("keys", "distinct API keys of those guilds, 24 polls a minute each (default 200"),
    ):
        parser.add_argument(
            f"--{name}", type=_positive, default=None, help=f"scale: {what}; --quick: a tenth)"
        )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    engines = ["sqlite", "postgresql"] if args.engine == "both" else [args.engine]
    scale_options = {
        "engines": engines,
        "workers": args.workers,
        "touch_cap": args.touch_cap,
        "window": args.window,
        "jobs": args.jobs,
        "guilds": args.guilds,
        "keys": args.keys,
    }
    asyncio.run(_main(names, quick=args.quick, keep=args.keep, scale_options=scale_options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
