"""Safety checking on Discord's side, without Discord: the review card, Approve / Reject and
who may click them, the refusals of actions on a held result, ``/jobs`` and the DM notice.

The end-to-end paths (a real bot, the emulator) are in ``tests/e2e/test_safety_e2e.py``.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import discord
import pytest

from bot.clock import ManualClock
from bot.discord.dm_notice import DmNoticeAnnouncer
from bot.discord.render.job_list import job_list_pages
from bot.discord.render.safety import review_card, review_decided
from bot.discord.result_clicks import WITHHELD, require_visible
from bot.domain import DeliveryRoute, JobStatus, Kind, MemberSettings, SafetyRecord, Visibility
from bot.errors import ValidationFailed
from bot.services.private_cards import PrivateCards
from cogs.safety import REVIEWERS_ONLY, ReviewAction, SafetyCog
from tests.support.jobs import SAMPLE_JOB
from tests.support.stack import Stack

GUILD, MEMBER, REVIEWER = 1, 100, 200
USER = MEMBER


def job(**changes: Any) -> Any:
    """A finished video of ``USER``'s in server 1 (as ``tests/discord/test_dm_notice.py``'s)."""
    values: dict[str, Any] = {
        "id": 7,
        "kind": Kind.VIDEO,
        "guild_id": 1,
        "channel_id": 10,
        "message_id": 99,
        "user_id": USER,
        "prompt_summary": "a heron at dawn",
        "status": JobStatus.COMPLETED,
        "outputs": ("https://api.example/files/v.mp4",),
    }
    values.update(changes)
    return dataclasses.replace(SAMPLE_JOB, **values)


class Inner:
    """The announcer the DM notice wraps: notices only."""

    async def notify(self, job: Any, route: DeliveryRoute) -> None:
        return None


class Client:
    """Opens DMs and keeps what is sent there."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def create_dm(self, user: Any) -> Any:
        sent = self.sent

        class Dm:
            async def send(self, content: str, **_: Any) -> None:
                sent.append(content)

        return Dm()


def test_the_review_card_shows_the_result_as_a_spoiler_with_approve_and_reject() -> None:
    parts = review_card(
        ref="j12",
        kind="image",
        prompt="a red square @everyone",
        user_id=MEMBER,
        score=0.73,
        visibility=Visibility.HELD,
        reason="score",
        files=(("SPOILER_j12-1.png", b"png"),),
    )
    assert parts.action_buttons == (("Approve", "gb:approve:j12"), ("Reject", "gb:reject:j12"))
    assert parts.files == (("SPOILER_j12-1.png", b"png"),)
    assert parts.card is not None and parts.card.spoiler
    assert parts.card.media == (("attachment://SPOILER_j12-1.png", "Image"),)
    text = parts.content or ""
    assert "Held for review" in text and "0.73" in text and f"<@{MEMBER}>" in text
    assert "@everyone" not in text  # escaped: the prompt pings nobody
    assert parts.allowed_mentions is not None and not parts.allowed_mentions.users

    failed = review_card(
        ref="r3",
        kind="video",
        prompt="",
        user_id=MEMBER,
        score=None,
        visibility=Visibility.WITHHELD,
        reason="failed",
        files=(),
    )
    body = failed.content or ""
    assert "Withheld" in body and "failed" in body and "Review page" in body


def test_a_decided_review_card_has_no_button_and_no_file() -> None:
    parts = review_decided("j12", "image", "a prompt", "Approved by <@200>: shown on its card.")
    assert parts.action_buttons == () and parts.files == ()
    assert "Approved by" in (parts.content or "")


class Response:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bool]] = []
        self.deferred = False

    def is_done(self) -> bool:
        return self.deferred or bool(self.sent)

    async def send_message(self, text: str, *, ephemeral: bool = False, **_: Any) -> None:
        self.sent.append((text, ephemeral))

    async def defer(self, **_: Any) -> None:
        self.deferred = True


def clicked(permissions: discord.Permissions, client: Any = None) -> Any:
    return SimpleNamespace(
        permissions=permissions,
        guild_id=GUILD,
        user=SimpleNamespace(id=REVIEWER, mention=f"<@{REVIEWER}>"),
        response=Response(),
        extras={},
        client=client,
        edited=[],
    )


@pytest.mark.parametrize("action", ["approve", "reject"])
async def test_a_member_without_manage_server_or_messages_is_refused_ephemerally(
    action: str,
) -> None:
    interaction = clicked(discord.Permissions(send_messages=True, read_messages=True))
    await ReviewAction(action, "j12").callback(interaction)
    assert interaction.response.sent == [(REVIEWERS_ONLY, True)]
    assert not interaction.response.deferred  # nothing decided, nothing acknowledged publicly


class Safety:
    """The service as the buttons use it: records each decision."""

    def __init__(self) -> None:
        self.decided: list[tuple[str, str, int, str]] = []

    def _record(self, ref: str, state: Visibility) -> SafetyRecord:
        return SafetyRecord(
            ref, GUILD, 10, MEMBER, "image", "a prompt", 0.7, state, "score", 0.0, card=None
        )

    async def approve(self, ref: str, *, guild_id: int, user_id: int, via: str) -> SafetyRecord:
        self.decided.append(("approve", ref, user_id, via))
        return self._record(ref, Visibility.APPROVED)

    async def reject(self, ref: str, *, guild_id: int, user_id: int, via: str) -> SafetyRecord:
        self.decided.append(("reject", ref, user_id, via))
        return self._record(ref, Visibility.REJECTED)


class Generation:
    async def job(self, job_id: int) -> Any:
        return None  # forgotten: the review card is still told


class Locales:
    async def of(self, guild_id: int | None) -> str | None:
        return None


@pytest.mark.parametrize(
    "permissions",
    [discord.Permissions(manage_guild=True), discord.Permissions(manage_messages=True)],
    ids=["manage-server", "manage-messages"],
)
@pytest.mark.parametrize("action", ["approve", "reject"])
async def test_manage_server_or_manage_messages_decides_and_the_card_says_who(
    permissions: discord.Permissions, action: str
) -> None:
    safety = Safety()
    client = SimpleNamespace(locales=Locales())
    cog = SafetyCog(client, safety, Generation())  # type: ignore[arg-type]
    client.get_cog = lambda name: cog  # type: ignore[attr-defined]
    interaction = clicked(permissions, client)

    async def edit_original_response(**kwargs: Any) -> None:
        interaction.edited.append(kwargs)

    interaction.edit_original_response = edit_original_response
    await ReviewAction(action, "j12").callback(interaction)
    assert safety.decided == [(action, "j12", REVIEWER, "discord")]
    assert interaction.response.sent == []  # no refusal
    (edit,) = interaction.edited
    items = list(edit["view"].walk_children())
    text = " ".join(str(getattr(item, "content", "")) for item in items)
    said = "Approved by" if action == "approve" else "Rejected by"
    assert said in text and f"<@{REVIEWER}>" in text
    assert not [i for i in items if isinstance(i, discord.ui.Button)]  # decided: no buttons
    assert edit["attachments"] == []  # and no file


# -- actions on a held result ----------------------------------------------------------


class Hidden:
    def __init__(self, hidden: set[str], held: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self._hidden = hidden
        self._held = held

    async def hidden(self, refs: Any) -> set[str]:
        return {ref for ref in refs if ref in self._hidden}

    async def is_held(self, ref: str) -> bool:
        return ref in self._held


async def test_actions_on_a_held_result_are_refused_and_others_pass() -> None:
    client = SimpleNamespace(services=SimpleNamespace(moderation=Hidden({"j5"})))
    interaction = SimpleNamespace(client=client)
    await require_visible(interaction, "j4")  # type: ignore[arg-type]
    await require_visible(interaction)  # type: ignore[arg-type]
    with pytest.raises(ValidationFailed) as refused:
        await require_visible(interaction, "j4", "j5")  # type: ignore[arg-type]
    assert refused.value.sentence == WITHHELD


def test_jobs_lists_a_held_result_without_its_files_links() -> None:
    url = "https://cdn.example/secret.png"
    held = dataclasses.replace(SAMPLE_JOB, id=5, outputs=(url,), message_id=None)
    shown = dataclasses.replace(SAMPLE_JOB, id=6, outputs=("https://cdn.example/ok.png",))
    (page,) = job_list_pages(
        [held, shown],
        now=SAMPLE_JOB.created_at + 60,
        estimates={},
        whose="your",
        show_requester=False,
        withheld={5},
    )
    held_field, shown_field = page.fields
    assert url not in (held_field.value or "")
    assert "held or withheld by the server's safety policy" in (held_field.value or "")
    assert "https://cdn.example/ok.png" in (shown_field.value or "")


# -- the DM notice -------------------------------------------------------------------------


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_the_dm_of_a_held_result_says_it_waits_and_a_withheld_one_sends_none(
    stack: Stack,
) -> None:
    db = stack.db
    await db.members.save(MemberSettings(USER, notify_dm=True), ManualClock().time())
    client = Client()
    safety = Hidden({"j7", "j8"}, held={"j7"})
    announcer = DmNoticeAnnouncer(
        Inner(),  # type: ignore[arg-type]
        client,  # type: ignore[arg-type]
        db.members,
        PrivateCards(db),
        safety=safety,
    )
    await announcer.notify(job(id=7), DeliveryRoute.PLACEHOLDER)
    (text,) = client.sent
    assert "waiting for the server's moderators" in text
    assert "api.example" not in text and "discord.com/channels" not in text
    await announcer.notify(job(id=8), DeliveryRoute.PLACEHOLDER)  # withheld: quiet
    assert len(client.sent) == 1
    await announcer.notify(job(id=9), DeliveryRoute.PLACEHOLDER)  # shown: as ever
    assert "api.example/files/v.mp4" in client.sent[-1]
