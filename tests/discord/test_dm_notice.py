"""The opt-in DM of finished results (``/settings notify dm``): its text, and that a
refused DM (50007) is dropped silently, never in the way of the delivery."""

from dataclasses import dataclass, field
from typing import Any
from unittest.mock import MagicMock

import discord
import pytest

from bot.clock import ManualClock
from bot.discord.dm_notice import DmNoticeAnnouncer, dm_notice_text
from bot.domain import DeliveryRoute, Job, JobStatus, Kind, MemberSettings
from bot.jobs.announcer import Attempt
from bot.services.private_cards import PrivateCards
from bot.storage import Database
from tests.support.stack import Stack

USER = 100


def job(**changes: Any) -> Job:
    values: dict[str, Any] = {
        "id": 7,
        "task_id": "t-7",
        "provider": "p",
        "poll_url": None,
        "kind": Kind.VIDEO,
        "model": "aurora-lite/text-to-video",
        "guild_id": 1,
        "channel_id": 10,
        "message_id": 99,
        "user_id": USER,
        "prompt_summary": "a heron at dawn",
        "details": {},
        "cost_cents": None,
        "key_fingerprint": "f",
        "created_at": 0.0,
        "next_poll_at": 0.0,
        "status": JobStatus.COMPLETED,
        "finished_at": 1.0,
        "outputs": ("https://api.example/files/v.mp4",),
        "error": None,
        "poll_count": 1,
        "announced_at": 2.0,
        "last_progress_at": None,
    }
    values.update(changes)
    return Job(**values)


@dataclass
class Inner:
    notified: list[tuple[int, DeliveryRoute]] = field(default_factory=list)

    async def progress(self, job: Job, now: float) -> None: ...

    async def stopped_watching(self, job: Job, now: float) -> None: ...

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Any = None) -> Attempt:
        raise NotImplementedError

    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        self.notified.append((job.id, route))


class Client:
    def __init__(self, error: Exception | None = None) -> None:
        self.sent: list[str] = []
        self.error = error

    async def create_dm(self, user: discord.abc.Snowflake) -> Any:
        client = self

        class Dm:
            async def send(self, content: str, **kw: Any) -> None:
                if client.error is not None:
                    raise client.error
                client.sent.append(content)

        return Dm()


def test_the_text_names_the_result_links_the_card_and_the_file() -> None:
    text = dm_notice_text(job())
    assert text.startswith("Your video is ready: “a heron at dawn”.")
    assert "https://discord.com/channels/1/10/99" in text
    assert "<https://api.example/files/v.mp4>" in text
    personal = dm_notice_text(job(guild_id=-USER, kind=Kind.IMAGE))
    assert "Your image is ready" in personal and "/jobs" in personal
    assert "discord.com/channels" not in personal


def refused() -> discord.HTTPException:
    response = MagicMock(status=403, reason="Forbidden")
    return discord.Forbidden(response, {"code": 50007, "message": "Cannot send messages"})


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_only_members_who_asked_get_it_and_a_refusal_is_silent(stack: Stack) -> None:
    db: Database = stack.db
    inner, client = Inner(), Client()
    announcer = DmNoticeAnnouncer(inner, client, db.members, PrivateCards(db))  # type: ignore[arg-type]
    await announcer.notify(job(), DeliveryRoute.PLACEHOLDER)
    assert client.sent == [] and inner.notified == [(7, DeliveryRoute.PLACEHOLDER)]

    await db.members.save(MemberSettings(USER, notify_dm=True), ManualClock().time())
    await announcer.notify(job(), DeliveryRoute.PLACEHOLDER)
    assert len(client.sent) == 1
    await announcer.notify(job(), DeliveryRoute.DM)  # the result itself went by DM
    await announcer.notify(job(status=JobStatus.FAILED, outputs=()), DeliveryRoute.CHANNEL)
    assert len(client.sent) == 1

    closed = DmNoticeAnnouncer(inner, Client(refused()), db.members, PrivateCards(db))  # type: ignore[arg-type]
    await closed.notify(job(), DeliveryRoute.PLACEHOLDER)  # no exception: dropped
    assert inner.notified[-1] == (7, DeliveryRoute.PLACEHOLDER)


class Locales:
    async def of(self, guild_id: int | None) -> str | None:
        return "de"


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_the_notice_is_written_in_the_language_of_the_results_server(stack: Stack) -> None:
    db: Database = stack.db
    client = Client()
    await db.members.save(MemberSettings(USER, notify_dm=True), ManualClock().time())
    announcer = DmNoticeAnnouncer(
        Inner(),  # type: ignore[arg-type]
        client,  # type: ignore[arg-type]
        db.members,
        PrivateCards(db),
        locales=Locales(),  # type: ignore[arg-type]
    )
    await announcer.notify(job(), DeliveryRoute.PLACEHOLDER)
    assert client.sent[0].startswith("Dein Video ist fertig: „a heron at dawn“.")
    assert "Ergebnis: <https://api.example/files/v.mp4>" in client.sent[0]
