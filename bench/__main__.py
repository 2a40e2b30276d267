"""``python -m bench [burst|rate|scale|all] [--quick]``: run the benchmarks, print tables."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import burst, rate, scale
from bench.report import Table, machine

Scenario = Callable[..., Awaitable[Table]]
SCENARIOS: dict[str, Scenario] = {"burst": burst.run, "rate": rate.run, "scale": scale.run}


async def _main(names: list[str], *, quick: bool, keep: Path | None) -> None:
    print(machine().render(), flush=True)
    with tempfile.TemporaryDirectory(prefix="genbot-bench-") as tmp:
        root = keep or Path(tmp)
        for name in names:
            workdir = root / name
            workdir.mkdir(parents=True, exist_ok=True)
            began = time.monotonic()
            print(f"\nrunning {name}{' (quick)' if quick else ''}...", flush=True)
            table = await SCENARIOS[name](workdir, quick=quick)
            table.notes.append(f"scenario wall time {time.monotonic() - began:.0f} s")
            print(table.render(), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenario", nargs="?", default="all", choices=[*SCENARIOS, "all"])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the bot logs and databases in this folder"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    asyncio.run(_main(names, quick=args.quick, keep=args.keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
