"""Re-shows of a job's card: its Show result button and ``/jobs show``.

Answered with the clicker's fresh interaction, within its upload limit, from a memory slot of
their own that deliveries never wait behind, reusing for a short while the files the job's last
re-show fetched (:mod:`bot.discord.shown_files`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from bot.discord.delivery.context import DeliveryContext
from bot.discord.delivery.present import HERE, Shown
from bot.discord.delivery.progress import pending_parts
from bot.discord.render.buttons import show_buttons
from bot.discord.render.parts import MessageParts
from bot.discord.shown_files import SHOW_MEMORY_BYTES, ShownFiles
from bot.domain import Job, JobStatus
from bot.jobs.byte_budget import ByteBudget
from bot.services.schedule import PollSchedule


class ReShow:
    """Builds a job's card as it stands now, for whoever asked to see it again.

    Args:
        context: what the routes share.
        sandbox: mark every card as made by the sandbox emulator.
        schedule: estimates when a pending job will be ready; None shows no estimate.

    Attributes:
        memory: the re-shows' own bound on downloaded bytes held at once.
        files: the files a re-show fetched, kept a short while for the job's next one (the
            :class:`~.present.Shown` that :meth:`~.present.Presenter.prepare` made of them).
    """

    def __init__(
        self, context: DeliveryContext, *, sandbox: bool, schedule: PollSchedule | None
    ) -> None:
        self._context = context
        self._sandbox = sandbox
        self._schedule = schedule
        self.memory = ByteBudget(SHOW_MEMORY_BYTES, context.clock)
        self.files = ShownFiles(context.clock)

    async def show(
        self, job: Job, limit: int, send: Callable[[MessageParts], Awaitable[None]]
    ) -> None:
        """Build ``job``'s card as it stands now and hand it to ``send``.

        A pending job's card (with Show result), a finished one with its buttons and its files
        downloaded within ``limit`` bytes (the interaction's ``filesize_limit``), held in the
        re-shows' own memory slot until ``send`` returns, and reused by the job's next re-show
        for a short while.

        Raises:
            discord.HTTPException: ``send`` failed (as it raised it).
        """
        presenter = self._context.presenter
        if job.status is JobStatus.PENDING:
            now = self._context.clock.time()
            parts = await pending_parts(job, now, sandbox=self._sandbox, schedule=self._schedule)
            await send(dataclasses.replace(parts, action_buttons=show_buttons(job.id)))
            return
        kept = self.files.get(job.id, limit)
        if kept is not None:  # downloaded for a re-show a moment ago: not fetched again
            await send(presenter.finished(job, Shown(*kept))[1])
            return
        wanted = limit if job.status is JobStatus.COMPLETED and job.outputs else 0
        # The re-shows' own slot, never the deliveries' budget: a flood of re-shows cannot
        # make a delivery wait (bot.discord.shown_files).
        async with self.memory.hold(wanted) as held:
            shown = await presenter.prepare(job, limit, limit_name=HERE)
            held.shrink(shown.size)
            if shown.files:
                self.files.keep(job.id, limit, shown.files, shown.note, shown.visibility)
            await send(presenter.finished(job, shown)[1])
