"""Requests that must not reach private places, and paid results that must not be thrown away.

A result whose link redirects to another origin is linked, not downloaded; typed image URLs
to private places are refused; an empty attachment is refused; a transient 404 on a poll does
not fail a paid video; a gateway's JSON 502 after a generation POST is answered with the
may-have-charged sentence. The real bot process, both emulators.
"""

import ipaddress
import socket

import pytest

from bot.genapi.outputs import is_public_address
from tests.support.e2e.harness import World, result_url
from tests.support.e2e.refusals import generation_posts, refused
from tests.support.e2e.videos import catalogue, submit_video, video_model

pytestmark = pytest.mark.asyncio(loop_scope="module")


def file_requests(world: World, name: str) -> list[str]:
    return [r.path for r in world.api.requests if r.path.split("?")[0] == f"/files/{name}"]


async def test_a_result_redirected_to_another_origin_is_linked_not_downloaded(
    world: World,
) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    # The same emulator under another origin (a loopback name): whoever follows the redirect
    # gets the file, and would post what a loopback host served.
    world.api.redirect_files(world.api.origin.replace("127.0.0.1", "localhost"))
    try:
        _, placeholder = await submit_video(world, "a lantern in the fog")
        done = await world.discord.wait_for_edit(
            placeholder.id, lambda m: "/files/" in m.text, timeout=40
        )
    finally:
        world.api.redirect_files(None)
    assert done.attachments == []
    assert "not attached (not downloaded: its link redirects to another site)" in done.text
    url = result_url(done)
    assert url.startswith(world.api.origin)  # the link is still shown
    name = url.rsplit("/", 1)[1]
    assert file_requests(world, name) == [f"/files/{name}"]  # the redirect; never its target


@pytest.mark.parametrize(
    ("url", "sentence"),
    [
        ("https://user:secret@cdn.example/fox.png", "user name or password"),
        ("https://localhost/fox.png", "public address"),
        ("https://169.254.169.254/latest/meta-data/", "public address"),
        ("https://[::1]:8080/fox.png", "public address"),
        ("https://10.0.0.7/fox.png", "public address"),
    ],
)
async def test_a_typed_image_url_to_a_private_place_is_refused(
    world: World, url: str, sentence: str
) -> None:
    options = {"prompt": "make it blue", "mode": "i2i", "image_url": url}
    assert sentence in await refused(world, "image", options)
    urls = {"prompt": "make it blue", "mode": "i2i", "image_urls": f"https://cdn.example/a {url}"}
    assert sentence in await refused(world, "image", urls)


def image_to_video() -> str:
    return str(next(m["id"] for m in catalogue("video") if m["mode"] == "image-to-video"))


async def refused_everywhere(world: World, url: str) -> str:
    """Type ``url`` as /image's image_url and image_urls and /video's image_url; all refused."""
    sentences = [
        await refused(world, "image", {"prompt": "make it blue", "mode": "i2i", "image_url": url}),
        await refused(
            world,
            "image",
            {"prompt": "make it blue", "mode": "i2i", "image_urls": f"https://cdn.example/a {url}"},
        ),
        await refused(
            world, "video", {"prompt": "it moves", "model": image_to_video(), "image_url": url}
        ),
    ]
    assert len(set(sentences)) == 1
    return sentences[0]


@pytest.mark.parametrize(
    "url",
    [
        "https://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/fox.png",  # enclosed letters: localhost
        "https://１２７。０。０。１/fox.png",  # full-width digits, ideographic full stops
        "https://１０．０．０．７:8443/fox.png",
        "https://[::127.0.0.1]/fox.png",  # IPv4-compatible
        "https://[::ffff:7f00:1]/fox.png",  # IPv4-mapped, in hex
        "https://[64:ff9b::a00:7]/fox.png",  # NAT64 of 10.0.0.7
        "https://[64:ff9b:1::808:808]/fox.png",  # local-use NAT64
    ],
)
async def test_a_typed_url_dressed_as_public_is_refused(world: World, url: str) -> None:
    assert "public address" in await refused_everywhere(world, url)


async def test_a_typed_name_that_resolves_to_a_private_address_is_refused(world: World) -> None:
    # The machine's own name: /etc/hosts points it at loopback or the container's address.
    name = socket.gethostname()
    found = {info[4][0].split("%")[0] for info in socket.getaddrinfo(name, 443)}
    if all(is_public_address(ipaddress.ip_address(address)) for address in found):
        pytest.skip(f"{name} resolves to public addresses here")
    assert "public address" in await refused_everywhere(world, f"https://{name}/fox.png")


async def test_a_typed_unicode_host_reaches_the_service_as_it_was_checked(world: World) -> None:
    posts = generation_posts(world)
    typed = "https://ｃｄｎ。ｅｘａｍｐｌｅ/fox.png"
    handle = await world.command(
        "image", {"prompt": "make it blue", "mode": "i2i", "image_url": typed}
    )
    await world.answer(handle)
    assert generation_posts(world) == posts + 1
    sent = [r for r in world.api.requests if r.method == "POST"][-1]
    assert sent.json["image_url"] == "https://cdn.example/fox.png"


async def test_an_empty_attachment_is_refused_and_costs_nothing(world: World) -> None:
    posts = generation_posts(world)
    handle = await world.command(
        "image",
        {"prompt": "make it blue", "mode": "i2i"},
        attachments={"image": ("empty.png", b"", "image/png")},
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    assert "empty" in answer.content
    assert generation_posts(world) == posts


async def test_a_video_whose_first_polls_answer_404_still_arrives(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    model = video_model(world)
    prompt = "a kite over the dunes"
    handle = await world.command(
        "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    )
    assert (await world.answer(handle)).ephemeral
    # The next requests are this video's first polls: a node that does not know the task yet.
    world.api.inject_fault("404", 2)
    placeholder = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and prompt in m.text, include_existing=True
    )
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text or "failed" in m.text, timeout=60
    )
    assert "/files/" in done.text
    (task_id,) = [t for t, task in world.api.tasks.items() if task.request.get("prompt") == prompt]
    assert [r.status for r in world.api.requests if task_id in r.path][:2] == [404, 404]


async def test_a_gateways_502_after_the_charge_is_not_an_invitation_to_pay_twice(
    world: World,
) -> None:
    model = video_model(world)
    world.api.inject_fault("gateway_502", 1)  # processed and charged, then a gateway's 502
    handle = await world.command(
        "video", {"prompt": "a fox behind a proxy", "model": model["id"], "duration": 5}
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    assert "may still have been charged" in answer.content
    assert "`/usage`" in answer.content and "`/jobs`" in answer.content
    assert "try again later" not in answer.content
    posts = [r for r in world.api.requests if r.method == "POST" and r.status == 502]
    assert len(posts) == 1  # never sent again
