"""``python -m bench redaction``: the cost of one log record as the known secrets grow.

Each record goes through :class:`bot.ops.logs.RedactionFilter` as a handler runs it (the
message rendered with its arguments, then redacted), on one core, no I/O. Measured with no
known secret, then with :data:`bot.redaction.KNOWN_SECRETS_LIMIT` (10,000) learnt API keys,
then with as many non-word secrets as are kept besides (:data:`bot.redaction.ODD_SECRETS_LIMIT`);
and what learning one more key costs (a word: a set insert; a non-word: the next record
compiles the alternation again). For comparison, the rule before the set was bounded: each
known secret looked for with ``str.replace`` in every record.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from bench.report import Table
from bot.ops.logs import RedactionFilter
from bot.redaction import KNOWN_SECRETS_LIMIT, ODD_SECRETS_LIMIT, REDACTED

LINES = (
    "job %s task %s polled: processing (guild %s, next poll in %.1f s)",
    "POST https://discord.com/api/v10/webhooks/1234/%s/messages/@original 200",
    "upstream refused a command: 401 UNAUTHORIZED (key %s, guild %s)",
)


def _record(n: int, key: str) -> logging.LogRecord:
    template = LINES[n % len(LINES)]
    args: tuple[object, ...] = {
        0: (n, f"tsk_{n:08x}", 123456789012345678, 4.0),
        1: ("aW50ZXJhY3Rpb246" + "x" * 60,),
        2: (key, 123456789012345678),
    }[n % len(LINES)]
    return logging.LogRecord("bot.jobs.poller", logging.INFO, __file__, 1, template, args, None)


def _per_record(redaction: Callable[[logging.LogRecord], object], keys: list[str]) -> float:
    """Microseconds of CPU per record, the best of three runs."""
    count = 3_000
    best = float("inf")
    for _ in range(3):
        records = [_record(n, keys[n % len(keys)]) for n in range(count)]
        began = time.process_time()
        for record in records:
            redaction(record)
        best = min(best, (time.process_time() - began) / count)
    return best * 1e6


def _replace_each(known: list[str]) -> Callable[[logging.LogRecord], object]:
    """The unbounded rule: every known secret tried on every record (for comparison)."""
    ordered = sorted(known, key=len, reverse=True)

    def run(record: logging.LogRecord) -> object:
        text = record.getMessage()
        for secret in ordered:
            text = text.replace(secret, REDACTED)
        return text

    return run


async def run(workdir: Path, *, quick: bool) -> Table:
    del workdir  # nothing written: the filter runs in this process
    table = Table("log redaction: CPU per log record")
    keys = [f"sk-gen-{secrets.token_hex(16)}" for _ in range(KNOWN_SECRETS_LIMIT)]
    odd = [f"{secrets.token_urlsafe(24)}=" for _ in range(ODD_SECRETS_LIMIT)]

    empty = RedactionFilter()
    table.add("no known secret", f"{_per_record(empty.filter, keys):.1f} us")

    full = RedactionFilter()
    for key in keys:
        full.add(key)
    assert full.known == KNOWN_SECRETS_LIMIT
    sample = _record(2, keys[7]).getMessage()
    assert keys[7] not in full.redact(sample)
    table.add(
        f"{full.known:,} known keys", f"{_per_record(full.filter, keys):.1f} us", "flat: as above"
    )
    for secret in odd:
        full.add(secret)
    _ = full.pattern  # compiled once, here, not per record
    table.add(
        f"{full.known:,} known ({ODD_SECRETS_LIMIT} of them non-words)",
        f"{_per_record(full.filter, keys):.1f} us",
    )

    began = time.process_time()
    for n in range(1_000):
        full.add(f"sk-gen-{n:032x}")  # each evicts the least recent
    table.add("learn one more key (word)", f"{(time.process_time() - began) * 1e3:.1f} us")
    began = time.process_time()
    rounds = 5 if quick else 20
    for n in range(rounds):
        full.add(f"odd secret {n}=")
        _ = full.pattern
    per_compile = (time.process_time() - began) / rounds
    table.add(
        "learn one more non-word (compile)",
        f"{per_compile * 1e3:.2f} ms",
        "once per change, at the next record",
    )

    if not quick:
        old = _replace_each(keys)
        table.add(
            f"before: str.replace of {len(keys):,} keys",
            f"{_per_record(old, keys[:1]):.1f} us",
            "grew with every key and interaction",
        )
    table.notes.append("CPU time (time.process_time), best of 3 runs of 3,000 records each")
    return table
