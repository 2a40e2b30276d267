"""Videos ordered through the harness as a member orders them, from the catalogue they offer."""

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import World


def catalogue(kind: str) -> list[dict]:
    return catalogue_json()["models"][kind]


def video_model(world: World, **wanted: object) -> dict:
    return next(
        m
        for m in catalogue("video")
        if all(m.get(k) == v for k, v in wanted.items()) and "image" not in m["mode"]
    )


async def submit_video(world: World, prompt: str, **options: object):
    model = video_model(world)
    handle = await world.command(
        "video",
        {"prompt": prompt, "model": model["id"], "duration": model["durations"][0], **options},
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    placeholder = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and prompt in m.text,
        include_existing=True,
    )
    return handle, placeholder


def shows(message: Message, task_id: str) -> bool:
    """Whether the message shows the task's video, as a link or as an attached file."""
    names = [a.filename for a in message.attachments]
    return task_id in message.content + message.text + str(names)


async def video_for(world: World, prompt: str) -> tuple[str, Message]:
    """Order a video; return its task id and the placeholder once it shows the result."""
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    handle = await world.command(
        "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    (task_id,) = [t for t, task in world.api.tasks.items() if task.request.get("prompt") == prompt]
    placeholder = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and prompt in m.text,
        include_existing=True,
    )
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: shows(m, task_id), timeout=40
    )
    return task_id, done
