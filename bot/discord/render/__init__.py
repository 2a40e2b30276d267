"""Discord presentation: pure functions that build messages, with no network and no bot state.

Everything here respects Discord's limits (see :mod:`bot.discord.render.limits`): content 2000
characters, embeds 6000 characters and at most 10 per message, 25 link buttons. Whatever echoes
a prompt or a model's output pings nobody (:data:`NO_PINGS`); only :func:`completion_reply`
pings, and only the requester.
"""

from bot.discord.render.catalogue import catalogue_pages
from bot.discord.render.job_list import job_list_pages
from bot.discord.render.jobs import (
    JobView,
    completion_reply,
    job_finished,
    job_placeholder,
    job_unwatched,
    posted_later,
)
from bot.discord.render.parts import NO_PINGS, MessageParts, ping_only
from bot.discord.render.results import image_result, text_answer
from bot.discord.render.text import format_duration, split_message, truncate

__all__ = [
    "NO_PINGS",
    "JobView",
    "MessageParts",
    "catalogue_pages",
    "completion_reply",
    "format_duration",
    "image_result",
    "job_finished",
    "job_list_pages",
    "job_placeholder",
    "job_unwatched",
    "ping_only",
    "posted_later",
    "split_message",
    "text_answer",
    "truncate",
]
