"""The settlement spool: a paid answer the database could not take, kept on local disk.

Between the service's answer and the ledger row there is nothing but the settlement's write
(:meth:`bot.services.billing.Billing.settle`); a transient database error there is retried with
backoff. If the write still fails, the settlement (the charge or its anomaly, and the job that
delivers an asynchronous result) is appended to this file, ``SETTLEMENT_SPOOL_PATH`` (default:
beside ``DATABASE_PATH``, ``data/bot.settlements.jsonl``), one JSON object a line, flushed and
``fsync``-ed before the member is answered. The next start replays it before anything else
(before the poller runs and before commands are accepted), and the running bot tries again
every minute; an entry leaves the file only once its settlement is committed. The reservation
is left to expire (15 minutes): until then it holds the budget twice, on the safe side, and a
reservation id alone cannot tell that hold from a later one.

Replaying is idempotent: an entry may be replayed after a crash between its commit and the
file's rewrite, or after an attempt whose commit was lost with its connection. A charge already
in the ledger (the same task, or for text the very same charge:
:meth:`~bot.storage.repos.ledger.LedgerStore.has_charge`) is not recorded again, and a job
already stored is kept (``jobs.insert`` is idempotent on its task). A charge a member's credit
balance pays (``docs/credits.md``) carries its reservation and its payer: the replay takes the
hold and the spend from the balance, keyed by the reservation (UNIQUE), so once whatever the
number of replays, and even when the hold expired meanwhile.

A settlement is spooled as soon as its first try fails, before the retry waits, and also when
its task is cancelled (a SIGTERM ends the commands still running after the shutdown grace):
whatever happens to the process during the retries, the charge and the job are on disk. A
retry that then succeeds removes its entry again; a replay that got there first did no harm.

Several processes sharing the file take an exclusive ``flock`` to append, to read the entries
or to remove the settled ones, in a thread (:mod:`asyncio` never waits on it), and only for
that: the replay's database work runs without the lock, so an append never waits behind a
replay stuck on the failing database. Two replays of one entry record it once (above).

Amounts are written as the exact Decimal text; times are UTC epoch seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass, fields
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from bot.domain import Charge, ChargeAnomaly, Kind, NewJob

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SpooledSettlement:
    """One settlement waiting in the spool.

    Attributes:
        id: a random id, for the logs.
        guild_id: the guild (or member's wallet) whose lock the settlement takes.
        charge: the charge for the ledger; None when it broke the protocol.
        anomaly: the protocol anomaly to record; None when the charge is sound.
        job: the job to store (asynchronous results); None for text and synchronous images.
        reservation_id: the reservation the settlement replaces; None without one (or an
            entry written before it was kept).
        payer_user_id: the member whose credit balance held the reservation and pays the
            charge (``docs/credits.md``); None when the server pays.
    """

    id: str
    guild_id: int
    charge: Charge | None
    anomaly: ChargeAnomaly | None
    job: NewJob | None
    reservation_id: int | None = None
    payer_user_id: int | None = None

    @classmethod
    def new(
        cls,
        guild_id: int,
        charge: Charge | None,
        anomaly: ChargeAnomaly | None,
        job: NewJob | None,
        *,
        reservation_id: int | None = None,
        payer_user_id: int | None = None,
    ) -> SpooledSettlement:
        """Build an entry with a fresh id."""
        return cls(uuid.uuid4().hex, guild_id, charge, anomaly, job, reservation_id, payer_user_id)

    def to_json(self) -> str:
        """One line of the spool (no newline)."""
        return json.dumps(
            {
                "id": self.id,
                "guild_id": self.guild_id,
                "charge": _encode(self.charge),
                "anomaly": _encode(self.anomaly),
                "job": _encode(self.job),
                "reservation_id": self.reservation_id,
                "payer_user_id": self.payer_user_id,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, line: str) -> SpooledSettlement:
        """Read one line of the spool.

        Raises:
            ValueError: the line is not an entry of this format.
        """
        try:
            raw = json.loads(line)
            return cls(
                id=str(raw["id"]),
                guild_id=int(raw["guild_id"]),
                charge=_decode(Charge, raw["charge"]),
                anomaly=_decode(ChargeAnomaly, raw["anomaly"]),
                job=_decode(NewJob, raw["job"]),
                reservation_id=_optional_int(raw.get("reservation_id")),
                payer_user_id=_optional_int(raw.get("payer_user_id")),
            )
        except (KeyError, TypeError, ArithmeticError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a spooled settlement: {exc}") from exc


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


_DECIMALS = frozenset({"cost_cents", "remaining_credits_cents"})


def _encode(row: Charge | ChargeAnomaly | NewJob | None) -> dict[str, Any] | None:
    if row is None:
        return None
    out: dict[str, Any] = {}
    for f in fields(row):
        value = getattr(row, f.name)
        if f.name in _DECIMALS and value is not None:
            value = str(Decimal(value))  # exact text; a caller may have passed an int
        elif isinstance(value, Kind):
            value = value.value
        elif f.name == "details":
            value = dict(value)
        out[f.name] = value
    return out


def _decode(cls: type[Any], raw: dict[str, Any] | None) -> Any:
    if raw is None:
        return None
    values = dict(raw)
    for name in _DECIMALS & values.keys():
        if values[name] is not None:
            values[name] = Decimal(values[name])
    values["kind"] = Kind(values["kind"])
    return cls(**values)


class SettlementSpool:
    """The spool file (module docstring).

    Every method here blocks on the file's ``flock`` and on ``fsync``: call them from a thread
    (``asyncio.to_thread``, as :class:`~bot.services.billing.Billing` does), never on the event
    loop. The lock is held only to append, to read the entries, or to remove settled ones;
    replaying them (database work) happens without it.

    Args:
        path: the file (``SETTLEMENT_SPOOL_PATH``); its folder is made when first written.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, entry: SpooledSettlement) -> None:
        """Append ``entry`` durably (flushed and fsync-ed when this returns).

        The append that creates the file (or finds it empty) also fsyncs the folder, so the
        new file's directory entry survives a crash as its line does.

        Raises:
            OSError: it could not be written (the caller logs the settlement in full).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked("a") as file:
            first = os.fstat(file.fileno()).st_size == 0
            file.write(entry.to_json() + "\n")
            file.flush()
            os.fsync(file.fileno())
        if first:
            _fsync_dir(self.path.parent)

    def pending(self) -> bool:
        """Whether the file holds anything (a cheap check before :meth:`read`)."""
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def read(self) -> list[SpooledSettlement]:
        """The entries waiting, oldest first (an unreadable line is skipped here, logged).

        Raises:
            OSError: the file could not be read.
        """
        if not self.path.exists():
            return []
        with self._locked("r") as file:
            text = file.read()
        entries: list[SpooledSettlement] = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                entries.append(SpooledSettlement.from_json(line))
            except ValueError as exc:
                log.error("settlement spool %s: unreadable line kept (%s)", self.path, exc)
        return entries

    def remove(self, ids: Collection[str]) -> None:
        """Drop the entries ``ids`` (settled) from the file; keep every other line as it is.

        Entries appended since they were read stay, as do unreadable lines. The file is
        rewritten (a temporary file, fsync-ed, renamed, the folder fsync-ed) under the lock.

        Raises:
            OSError: it could not be rewritten (the entries stay; replaying them again is
                harmless).
        """
        wanted = set(ids)
        if not wanted or not self.path.exists():
            return
        with self._locked("r") as file:
            lines = [line for line in file.read().splitlines() if line.strip()]
            kept = [line for line in lines if _entry_id(line) not in wanted]
            if len(kept) == len(lines):
                return
            temporary = self.path.with_name(self.path.name + ".tmp")
            with temporary.open("w", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in kept))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
            _fsync_dir(self.path.parent)

    @contextlib.contextmanager
    def _locked(self, mode: str) -> Iterator[IO[str]]:
        while True:
            file = self.path.open(mode, encoding="utf-8")
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX)
                # A removal may have replaced the file while this waited for the lock: the lock
                # is then on the old file, whose lines nobody reads again. Open the new one.
                try:
                    current = os.stat(self.path).st_ino == os.fstat(file.fileno()).st_ino
                except FileNotFoundError:
                    current = False
                if current:
                    yield file
                    return
            finally:
                file.close()  # closing releases the lock


def _entry_id(line: str) -> str | None:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError:
        return None
    return str(raw.get("id")) if isinstance(raw, dict) else None


def _fsync_dir(path: Path) -> None:
    # The rename is durable only once the folder's entry is.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
