"""The poller on the test stack, with the Discord side replaced by a recorder."""

import asyncio
from collections.abc import Callable

from bot.clock import ManualClock
from bot.domain import DeliveryRoute, Job
from bot.jobs.announcer import SHOWN, Attempt, Renew
from bot.jobs.poller import Poller
from bot.services.generation import Requester, VideoOptions
from tests.support.stack import Stack

GONE = Attempt(shown=False, permanent=True, error="404 10008 Unknown Message")
BUSY = Attempt(shown=False, error="503 0 Service Unavailable")


class RecordingAnnouncer:
    """The Discord side, replaced: records what the poller asks, answers as told.

    Args:
        refuse: routes that fail for good (a deleted placeholder, a closed DM...).
        failures: transient failures answered, in order, before anything is shown.
    """

    def __init__(
        self,
        *,
        placeholder_exists: bool = True,
        refuse: tuple[DeliveryRoute, ...] = (),
        failures: int = 0,
        clock: ManualClock | None = None,
    ) -> None:
        self.refuse = refuse + (() if placeholder_exists else (DeliveryRoute.PLACEHOLDER,))
        self.failures = failures
        self.clock = clock
        self.progress_edits: list[int] = []
        self.unwatched: list[int] = []
        self.attempts: list[tuple[int, DeliveryRoute, float]] = []
        self.results: list[Job] = []
        self.routes: list[DeliveryRoute] = []
        self.notified: list[int] = []

    async def progress(self, job: Job, now: float) -> None:
        self.progress_edits.append(job.id)

    async def stopped_watching(self, job: Job, now: float) -> None:
        self.unwatched.append(job.id)

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        self.attempts.append((job.id, route, self.clock.time() if self.clock else 0.0))
        if route in self.refuse or (route is DeliveryRoute.PLACEHOLDER and not job.message_id):
            return GONE
        if self.failures:
            self.failures -= 1
            return BUSY
        self.results.append(job)
        self.routes.append(route)
        return SHOWN

    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        if route is DeliveryRoute.PLACEHOLDER:
            self.notified.append(job.id)


def make_poller(stack: Stack, announcer: RecordingAnnouncer, **kw: float) -> Poller:
    return Poller(
        db=stack.db,
        client=stack.client,
        keys=stack.keys,
        schedule=stack.schedule,
        announcer=announcer,
        clock=stack.clock,
        **kw,  # type: ignore[arg-type]
    )


async def submit(
    stack: Stack, who: Requester, count: int = 1, prompt: str = "a fox", *, placeholder: bool = True
) -> list[Job]:
    """Submit videos as /video does, each with its placeholder posted (message id 1000 + n)."""
    catalogue = await stack.generation.catalogue(who.guild_id)
    model = next(m for m in catalogue.video if not m.needs_image)
    jobs = []
    for _ in range(count):
        job = await stack.generation.video(who, VideoOptions(prompt, model.id))
        if placeholder:
            await stack.generation.attach_message(job, 1000 + job.id)
        jobs.append(job)
    return jobs


async def run_until(poller: Poller, done: Callable[[], bool], limit: float = 20.0) -> None:
    """Run the poller until ``done()`` and it has nothing left to poll or announce."""
    task = asyncio.create_task(poller.run())
    try:
        async with asyncio.timeout(limit):
            while not (done() and poller.in_flight == 0):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
