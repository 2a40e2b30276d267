"""The Discord side of the poller: edit a job's placeholder, and ping its requester once.

Placeholders are ordinary channel messages the bot posted with its own token, never an
interaction's response: an interaction token dies 15 minutes after the command (then 401, code
50027), and a video can take longer. A placeholder a moderator deleted, or a channel the bot can
no longer see, ends the job's Discord side quietly: the job is already finished in the database
and the ledger, and retrying would only storm Discord with doomed requests.
"""

from __future__ import annotations

import logging

import discord

from bot.clock import Clock
from bot.render import completion_reply, job_finished, job_placeholder
from bot.storage.models import Job

log = logging.getLogger(__name__)

_GONE = (discord.NotFound, discord.Forbidden)
"""10008 unknown message, 10003 unknown channel, 50001 missing access, 50013 permissions."""


class DiscordAnnouncer:
    """Implements :class:`bot.poller.JobAnnouncer` with the bot's own REST calls.

    Args:
        client: the logged-in bot.
        clock: wall time, for the elapsed time shown.
        sandbox: mark every result as made by the sandbox emulator.
    """

    def __init__(self, client: discord.Client, *, clock: Clock, sandbox: bool) -> None:
        self._client = client
        self._clock = clock
        self._sandbox = sandbox

    def _message(self, job: Job) -> discord.PartialMessage | None:
        if job.message_id is None:
            return None
        channel = self._client.get_partial_messageable(job.channel_id, guild_id=job.guild_id)
        return channel.get_partial_message(job.message_id)

    async def progress(self, job: Job, now: float) -> None:
        """Refresh the placeholder's elapsed time."""
        message = self._message(job)
        if message is None:
            return
        parts = job_placeholder(job, now=now, sandbox=self._sandbox)
        try:
            await message.edit(**parts.edit_kwargs())
        except discord.HTTPException as exc:
            log.info("progress edit of job %s skipped: %s", job.id, exc)

    async def show_result(self, job: Job) -> bool:
        """Edit the placeholder into the result; return False if it no longer exists.

        A job whose placeholder was never posted (a crash right after submission) gets its
        result posted as a new message in its channel instead.
        """
        parts = job_finished(job, sandbox=self._sandbox)
        message = self._message(job)
        try:
            if message is None:
                channel = self._client.get_partial_messageable(
                    job.channel_id, guild_id=job.guild_id
                )
                await channel.send(**parts.kwargs())
            else:
                await message.edit(**parts.edit_kwargs())
        except _GONE as exc:
            log.info("job %s finished but its placeholder is gone: %s", job.id, exc)
            return False
        except discord.HTTPException as exc:
            log.warning("job %s finished but its placeholder could not be edited: %s", job.id, exc)
            return False
        return True

    async def notify(self, job: Job) -> None:
        """Reply to the placeholder, pinging only the requester."""
        parts = completion_reply(job)
        message = self._message(job)
        channel = self._client.get_partial_messageable(job.channel_id, guild_id=job.guild_id)
        try:
            if message is None:
                await channel.send(**parts.kwargs())
            else:
                await message.reply(**parts.kwargs(), mention_author=False)
        except discord.HTTPException as exc:
            log.info("could not notify the requester of job %s: %s", job.id, exc)
