"""``python -m bot.sandbox``: serve the Generation API emulator until Ctrl-C.

It prints the base URL and a fresh API key to use against it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys

from bot.sandbox.server import GenApiEmulator


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bot.sandbox",
        description="Serve a local emulator of the Generation Service API v1.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="service seconds per real second; 10 makes a 60 s video take 6 s",
    )
    parser.add_argument(
        "--balance-cents", type=int, default=100_000, help="balance of the printed key, in cents"
    )
    parser.add_argument("--key", default=None, help="use this sk-gen-... key instead of a new one")
    args = parser.parse_args(argv)
    if args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    return args


async def _serve(args: argparse.Namespace) -> None:
    api = GenApiEmulator(time_scale=args.time_scale)
    key = api.create_key(args.balance_cents, key=args.key)
    await api.start(args.host, args.port)
    try:
        print(f"Generation API emulator at {api.base_url}", flush=True)
        print(f"API key: {key}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C cancels this task
    finally:
        await api.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the emulator from the command line; return the exit status."""
    args = _parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(args))
    except OSError as exc:  # e.g. the port is in use; one line, not a traceback
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        print(
            f"genbot sandbox: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
