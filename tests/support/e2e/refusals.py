"""Commands that must be refused before any call to the service: the sentence, and no POST."""

from tests.support.e2e.harness import World


def generation_posts(world: World) -> int:
    return sum(1 for r in world.api.requests if r.method == "POST")


async def refused(world: World, name: str, options: dict, **kw: object) -> str:
    """Run a command that must be refused before any call; return the sentence shown."""
    posts = generation_posts(world)
    answer = await world.answer(await world.command(name, options, **kw))
    assert answer.ephemeral
    assert generation_posts(world) == posts
    return answer.content
