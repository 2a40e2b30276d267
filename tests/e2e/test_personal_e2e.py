"""Personal mode with the real bot process: a member's own install, billed to them."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from bot.services.keys import fingerprint
from tests.support.discord_emulator.errors import InvocationError
from tests.support.discord_emulator.models import Channel, Message
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons, result_url
from tests.support.e2e.personal import delivery, elsewhere, job_of, ledger
from tests.support.e2e.videos import video_model

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def personal_text(world: World, prompt: str, *, dm: bool = False) -> Message:
    """Run ``/text`` as the traveller, in the server without the bot or in the bot's DM."""
    return await world.answer(
        await elsewhere(world).invoke(world, "text", {"prompt": prompt}, dm=dm)
    )


def channel_requests(world: World, channel: Channel) -> list[str]:
    """REST requests the bot made (with its token) about ``channel``."""
    return [
        f"{r.method} {r.path}"
        for r in world.discord.requests
        if r.path.startswith(f"/channels/{channel.id}")
    ]


async def test_personal_use_needs_the_members_key_and_is_billed_to_them(world: World) -> None:
    place = elsewhere(world)
    posts = world.posts_to("/generate")

    # Before a personal key: one sentence saying how to set one, and no upstream call.
    refused = (await personal_text(world, "hello from afar")).text
    assert "/settings api-key set" in refused
    assert world.posts_to("/generate") == posts

    # The key is set in a private form, checked with the service, shown only by its end.
    own = world.api.create_key(balance_cents=10_000)
    saved = (await place.set_key(world, own)).content
    assert f"ending in `{own[-4:]}`" in saved
    assert own not in saved

    shown = await world.discord.invoke(
        "settings",
        {},
        guild_id=None,
        channel_id=world.discord.dm_channel(place.user.id).id,
        user_id=place.user.id,
        subcommand="show",
    )
    settings = await world.answer(shown)
    assert settings.ephemeral
    assert f"ending in `{own[-4:]}`" in settings.content
    assert own not in settings.content

    # Now /text in that server and in the bot's DM uses the member's key...
    answer = (await personal_text(world, "hello from afar")).text
    assert "hello from afar" in answer
    assert world.api.requests[-1].key == own
    in_dm = (await personal_text(world, "hello in private", dm=True)).text
    assert "hello in private" in in_dm
    assert world.api.requests[-1].key == own
    # ... and is recorded against the member, never a server.
    mine = [row for row in ledger(world) if row[2] == fingerprint(own)]
    assert mine == [(-place.user.id, place.user.id, fingerprint(own))] * 2
    # The bot, not a member there, never used its token on that server's channels.
    assert channel_requests(world, place.channel) == []

    # The member's own usage, in the personal context.
    usage = await world.discord.invoke(
        "usage",
        {},
        guild_id=None,
        channel_id=world.discord.dm_channel(place.user.id).id,
        user_id=place.user.id,
    )
    shown = await world.answer(usage)
    assert shown.ephemeral
    assert "Credits left on the key" in str(shown.embeds)


async def test_a_personal_results_buttons_charge_whoever_clicks_in_their_own_wallet(
    world: World,
) -> None:
    place = elsewhere(world)
    own = [r.key for r in world.api.requests if r.method == "POST"][-1]  # set in the test above
    result = await personal_text(world, "a haiku")
    again = next(b for b in action_buttons(result) if b["custom_id"].startswith("gb:again:"))
    posts = world.posts_to("/generate")

    # Another member, without an install or a key of their own: refused, nothing sent.
    other = world.discord.add_user("onlooker")
    clicked = await world.discord.press_button(
        result.id, again["custom_id"], user_id=other.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(clicked)
    assert "/settings api-key set" in (await world.answer(clicked)).text
    assert world.posts_to("/generate") == posts

    # The member: charged on their own key, again recorded against them.
    clicked = await world.discord.press_button(
        result.id, again["custom_id"], user_id=place.user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(clicked)
    assert "a haiku" in (await world.answer(clicked)).text
    assert world.posts_to("/generate") == posts + 1
    assert world.api.requests[-1].key == own
    assert list(ledger(world))[-1] == (-place.user.id, place.user.id, fingerprint(own))
    assert channel_requests(world, place.channel) == []


async def test_a_personal_result_is_deleted_without_touching_the_channel(world: World) -> None:
    place = elsewhere(world)
    result = await personal_text(world, "a limerick")
    delete = next(b for b in action_buttons(result) if b["custom_id"].startswith("gb:delete:"))
    clicked = await world.discord.press_button(
        result.id, delete["custom_id"], user_id=place.user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(clicked)
    done = await clicked.wait_followup(lambda m: "Deleted" in m.text, timeout=15)
    assert done.ephemeral
    assert world.discord.messages[result.id].deleted
    assert channel_requests(world, place.channel) == []


async def test_server_use_is_unchanged(world: World) -> None:
    before = list(ledger(world))
    handle = await world.command("text", {"prompt": "hello server"})
    answer = await world.answer(handle)
    assert "hello server" in answer.text
    assert world.api.requests[-1].key == world.key
    (new,) = list(ledger(world))[len(before) :]
    assert new == (world.guild.id, world.member.id, fingerprint(world.key))


def card_of(world: World, job_id: int) -> int | None:
    """The message id the bot recorded as the job's card."""
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        row = db.execute("SELECT message_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]


def with_token(world: World, token: str) -> list[tuple[str, int]]:
    """``(method, status)`` of every request the bot made with an interaction's token."""
    return [(r.method, r.status) for r in world.discord.requests if token in r.path]


async def test_a_video_whose_token_expired_is_shown_by_show_result_and_jobs_show(
    world: World,
) -> None:
    place = elsewhere(world)
    own = next(r.key for r in world.api.requests if r.method == "POST")  # set above
    posts = world.posts_to("/generate")
    handle = await place.invoke(
        world, "video", {"prompt": "a comet over the sea", "model": video_model(world)["id"]}
    )
    # The card is the interaction's own response (the bot cannot post in that channel),
    # public like a server's card, with a Show result button; paid from the member's key.
    card = await world.answer(handle)
    assert not card.ephemeral, card.text
    assert "a comet over the sea" in card.text
    job_id = job_of(card)
    assert world.posts_to("/generate") == posts + 1
    assert [r.key for r in world.api.requests if r.method == "POST"][-1] == own
    assert list(ledger(world))[-1] == (-place.user.id, place.user.id, fingerprint(own))

    # Discord's 15 minutes pass before the service finishes: the token dies (401 50027).
    world.discord_clock.advance(16 * 60)

    # The bot's database is not an emulator: it is read until the delivery is recorded.
    deadline = asyncio.get_running_loop().time() + 60
    while delivery(world, job_id)[1] is None:
        assert asyncio.get_running_loop().time() < deadline, "the job was never delivered"
        await asyncio.sleep(0.2)
    # Nowhere to show it but its card: the result waits for Show result and /jobs show.
    assert delivery(world, job_id)[0] == "jobs"
    assert "/files/" not in " ".join(world.discord.messages[card.id].urls)
    listing = await place.invoke(world, "jobs")
    assert f"/jobs show:{job_id}" in (await world.answer(listing)).text

    # Show result: the click's fresh token updates the card with the result.
    show = next(b for b in action_buttons(card) if b["custom_id"].startswith("gb:show:"))
    clicked = await world.discord.press_button(
        card.id, show["custom_id"], user_id=place.user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(clicked)

    def shown() -> Message | None:
        message = world.discord.messages[card.id]
        return message if any("/files/" in url for url in message.urls) else None

    updated = await world.discord.signal.wait_for(shown, 15, "the card to show its result")
    assert any(b["custom_id"] == f"gb:again:j{job_id}" for b in action_buttons(updated))
    assert result_url(updated)

    # /jobs show:<id>, in the bot's DM: the card again, with its buttons.
    again = await world.discord.invoke(
        "jobs",
        {"show": job_id},
        guild_id=None,
        channel_id=world.discord.dm_channel(place.user.id).id,
        user_id=place.user.id,
    )
    world.handles.append(again)
    reposted = await world.answer(again)
    assert result_url(reposted) == result_url(updated)
    assert any(b["custom_id"] == f"gb:again:j{job_id}" for b in action_buttons(reposted))

    # Someone else's job number shows nothing.
    other = world.discord.add_user("curious")
    world.discord.install_for_user(other.id)
    nosy = await world.discord.invoke(
        "jobs",
        {"show": job_id},
        guild_id=None,
        channel_id=world.discord.dm_channel(other.id).id,
        user_id=other.id,
    )
    world.handles.append(nosy)
    refused = await world.answer(nosy)
    assert refused.ephemeral
    assert f"no job #{job_id}" in refused.text

    # Never the bot's token on that server's channels, and the dead token was tried once.
    assert channel_requests(world, place.channel) == []
    used = with_token(world, handle.token)
    assert [r for r in used if r[1] == 401] == [("PATCH", 401)]
    assert used[-1] == ("PATCH", 401)  # never again once Discord refused it
    assert handle.token not in world.bot.log()


async def test_a_personal_video_in_the_bots_dm_is_shown_on_its_card_while_the_token_lives(
    world: World,
) -> None:
    place = elsewhere(world)
    dm = world.discord.dm_channel(place.user.id)
    handle = await world.discord.invoke(
        "video",
        {"prompt": "a lighthouse at dusk", "model": video_model(world)["id"]},
        guild_id=None,
        channel_id=dm.id,
        user_id=place.user.id,
    )
    world.handles.append(handle)
    card = await world.answer(handle)
    job_id = job_of(card)
    # The poller edits the card through the interaction's webhook, the file attached within
    # the interaction's upload limit, then pings the member with one followup.
    done = await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, timeout=40)
    assert done.attachments
    assert any(b["custom_id"] == f"gb:again:j{job_id}" for b in action_buttons(done))
    ping = await world.discord.wait_for_message(
        lambda m: m.id in handle.state.followup_ids and bool(m.pinged_user_ids()),
        include_existing=True,
        timeout=15,
    )
    assert ping.pinged_user_ids() == {place.user.id}
    assert delivery(world, job_id)[0] == "placeholder"

    # Again on the card charges the member who clicks, in their own wallet: a new card.
    own = next(r.key for r in world.api.requests if r.method == "POST")
    again = next(b for b in action_buttons(done) if b["custom_id"].startswith("gb:again:"))
    clicked = await world.discord.press_button(done.id, again["custom_id"], user_id=place.user.id)
    world.handles.append(clicked)
    second = await world.answer(clicked)
    assert "a lighthouse at dusk" in second.text and job_of(second) != job_id
    assert [r.key for r in world.api.requests if r.method == "POST"][-1] == own
    assert list(ledger(world))[-1] == (-place.user.id, place.user.id, fingerprint(own))

    # The bot's own token was never used on that channel, DM included.
    assert channel_requests(world, dm) == []
    assert handle.token not in world.bot.log()


async def test_a_personal_result_respects_the_interactions_upload_limit(world: World) -> None:
    place = elsewhere(world)
    # Discord tells each interaction its upload limit; here 5 MiB, below a 6 MiB video.
    world.discord.set_attachment_size_limit(place.user.id, 5 * 1024 * 1024)
    world.api.set_file_size(6 * 1024 * 1024)
    try:
        handle = await place.invoke(
            world, "video", {"prompt": "a heron taking off", "model": video_model(world)["id"]}
        )
        card = await world.answer(handle)
        done = await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, timeout=40)
    finally:
        world.api.set_file_size(None)
        world.discord.set_attachment_size_limit(place.user.id, 10 * 1024 * 1024)
    # Linked with the reason, not refused by Discord (413) and retried.
    assert done.attachments == []
    assert "upload limit here (5 MB)" in done.text
    assert [s for _, s in with_token(world, handle.token) if s == 413] == []


async def test_config_is_offered_only_where_the_server_installed_the_bot(world: World) -> None:
    place = elsewhere(world)
    with pytest.raises(InvocationError, match="not installed that way"):
        await world.discord.invoke(
            "config",
            {},
            guild_id=place.guild.id,
            channel_id=place.channel.id,
            user_id=place.user.id,
            group="api-key",
            subcommand="set",
        )


async def test_a_personal_card_is_finished_by_the_bot_after_a_restart(world: World) -> None:
    """The interaction token is kept (encrypted) with the job: a restarted bot still edits it."""
    place = elsewhere(world)
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        handle = await place.invoke(
            world, "video", {"prompt": "a tram in the rain", "model": video_model(world)["id"]}
        )
        card = await world.answer(handle)
        job_id = job_of(card)
        deadline = asyncio.get_running_loop().time() + 15
        while card_of(world, job_id) != card.id:  # the card recorded with the job
            assert asyncio.get_running_loop().time() < deadline, "the card was never recorded"
            await asyncio.sleep(0.1)

        # Show result while it runs: the card is updated in place (callback 7), still running.
        show = next(b for b in action_buttons(card) if b["custom_id"].startswith("gb:show:"))
        clicked = await world.discord.press_button(
            card.id, show["custom_id"], user_id=place.user.id, permissions=MEMBER_PERMISSIONS
        )
        world.handles.append(clicked)
        callback = await clicked.wait_callback(timeout=15)
        assert callback.type == 7 and callback.error is None
        assert "a tram in the rain" in world.discord.messages[card.id].text
        assert job_of(world.discord.messages[card.id]) == job_id

        def identifies() -> int:
            return sum(1 for event in world.discord.gateway_received if event.op == 2)

        identified = identifies()
        await world.bot.kill()
        assert "/files/" not in world.discord.messages[card.id].text  # not finished before
        await world.bot.start()
        await world.discord.signal.wait_for(
            lambda: (
                sum(1 for e in world.discord.gateway_received if e.op == 2) > identified or None
            ),
            60,
            "a second IDENTIFY",
        )
        await world.discord.wait_ready(timeout=60)
        done = await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, timeout=60)
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    assert delivery(world, job_id)[0] == "placeholder"
    assert any(b["custom_id"].startswith("gb:again:") for b in action_buttons(done))
    assert channel_requests(world, place.channel) == []
    assert handle.token not in world.bot.log()


async def wait_delivered(world: World, job_id: int) -> str:
    """The route the bot recorded once the job's delivery is (the database is read)."""
    deadline = asyncio.get_running_loop().time() + 60
    while delivery(world, job_id)[1] is None:
        assert asyncio.get_running_loop().time() < deadline, "the job was never delivered"
        await asyncio.sleep(0.2)
    return delivery(world, job_id)[0]


async def test_a_personal_video_finishing_after_its_token_is_announced_in_the_bots_dm(
    world: World,
) -> None:
    place = elsewhere(world)
    dm = world.discord.dm_channel(place.user.id)
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        handle = await place.invoke(
            world,
            "video",
            {"prompt": "a kite over the dunes", "model": video_model(world)["id"]},
            dm=True,
        )
        card = await world.answer(handle)
        job_id = job_of(card)
        # Discord's 15 minutes pass before the service finishes: the card's token dies.
        world.discord_clock.advance(16 * 60)
        notice = await world.discord.wait_for_message(
            lambda m: m.channel_id == dm.id and m.id != card.id and f"#{job_id}" in m.text,
            timeout=60,
        )
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    # In the DM it was asked in, with the bot's own token: what it is and how to see it.
    assert notice.webhook_id is None
    assert "a kite over the dunes" in notice.text and "is ready" in notice.text
    assert f"/jobs show:{job_id}" in notice.text
    assert await wait_delivered(world, job_id) == "dm"
    assert "/files/" not in " ".join(world.discord.messages[card.id].urls)

    # Its Show result button updates that message into the card, with the result.
    show = next(b for b in action_buttons(notice) if b["custom_id"] == f"gb:show:j{job_id}")
    clicked = await world.discord.press_button(notice.id, show["custom_id"], user_id=place.user.id)
    world.handles.append(clicked)
    shown = await world.discord.wait_for_edit(
        notice.id, lambda m: any("/files/" in url for url in m.urls), timeout=15
    )
    assert result_url(shown)
    assert handle.token not in world.bot.log()


async def test_a_late_personal_result_asked_elsewhere_reaches_a_member_with_dm_notices_on(
    world: World,
) -> None:
    place = elsewhere(world)
    dm = world.discord.dm_channel(place.user.id)
    on = await place.invoke(world, "settings", {"state": "on"}, group="notify", subcommand="dm")
    assert "I will DM you" in (await world.answer(on)).text
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        handle = await place.invoke(
            world, "video", {"prompt": "a ferry at dawn", "model": video_model(world)["id"]}
        )
        card = await world.answer(handle)
        job_id = job_of(card)
        world.discord_clock.advance(16 * 60)
        notice = await world.discord.wait_for_message(
            lambda m: m.channel_id == dm.id and f"#{job_id}" in m.text, timeout=60
        )
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
        off = await place.invoke(
            world, "settings", {"state": "off"}, group="notify", subcommand="dm"
        )
        await world.answer(off)
    assert "a ferry at dawn" in notice.text and f"/jobs show:{job_id}" in notice.text
    assert await wait_delivered(world, job_id) == "dm"
    assert channel_requests(world, place.channel) == []


async def test_a_server_install_without_the_bot_bills_nobody(world: World) -> None:
    # A server installed the commands alone; a member with a key of their own, but whose own
    # install is gone: neither wallet was allowed to pay there.
    guild = world.discord.add_guild("Commands Only", with_bot=False)
    channel = world.discord.add_channel(guild.id, "chat")
    world.discord.install_commands_only(guild.id)
    holder = world.discord.add_user("keyholder")
    world.discord.install_for_user(holder.id)
    own = world.api.create_key(balance_cents=10_000)
    place = type(elsewhere(world))(guild, channel, holder)
    assert f"ending in `{own[-4:]}`" in (await place.set_key(world, own)).content
    world.discord.uninstall_for_user(holder.id)

    posts = world.posts_to("/generate")
    charges = len(list(ledger(world)))
    handle = await place.invoke(world, "text", {"prompt": "who pays for this?"})
    refused = await world.answer(handle)
    assert refused.ephemeral
    assert "must add the bot" in refused.text
    assert world.posts_to("/generate") == posts
    assert len(list(ledger(world))) == charges


async def test_every_answer_names_who_paid(world: World) -> None:
    server = await world.answer(await world.command("text", {"prompt": "who paid here"}))
    assert "paid by this server" in server.text
    mine = await personal_text(world, "who paid there")
    assert "paid by your key" in mine.text
    place = elsewhere(world)
    handle = await place.invoke(
        world, "video", {"prompt": "a paid-for tide", "model": video_model(world)["id"]}
    )
    card = await world.answer(handle)
    assert "paid by your key" in card.text


def rate_rows(world: World, key: str) -> int:
    """Rows the bot's durable rate window holds for ``key`` (requests and block)."""
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        requests = db.execute(
            "SELECT COUNT(*) FROM rate_requests WHERE key_id = ?", (fingerprint(key),)
        ).fetchone()[0]
        blocks = db.execute(
            "SELECT COUNT(*) FROM rate_blocks WHERE key_id = ?", (fingerprint(key),)
        ).fetchone()[0]
    return int(requests) + int(blocks)


async def test_key_checks_are_paced_per_member_and_a_rejected_key_leaves_nothing(
    world: World,
) -> None:
    member = world.discord.add_user("key-typist")
    world.discord.install_for_user(member.id)
    place = type(elsewhere(world))(elsewhere(world).guild, elsewhere(world).channel, member)
    typo = "sk-this-is-not-a-key-at-all"
    refused = await place.set_key(world, typo)
    assert "rejected that key" in refused.content
    assert [r.key for r in world.api.requests].count(typo) == 1  # checked with the service
    assert rate_rows(world, typo) == 0  # nor a limiter's window row of it

    # Again at once, now with a good key: refused before anything is sent, saying when.
    own = world.api.create_key(balance_cents=1_000)
    again = await place.set_key(world, own)
    assert "/settings api-key set has a cooldown" in again.content
    assert own not in [r.key for r in world.api.requests]
