"""The Discord side of the poller: progress edits, and the delivery of each finished job.

:class:`DiscordAnnouncer` (:mod:`~.dispatch`) implements the poller's port as a small
dispatcher over the routes a result can take, each in a module of its own:

- :mod:`~.channel_card`: a server job's card edited into its result (in its channel, or a
  private job's in the member's DM) and replied to; or a new message in its channel;
- :mod:`~.dm`: a server job's result in the member's DM;
- :mod:`~.personal`: a card that is an interaction's response (a personal job's, or a private
  job's whose member's DMs are closed), and a personal result's late DM;
- :mod:`~.takes`: the one card the takes of a request share;
- :mod:`~.reshow`: a card shown again (Show result, ``/jobs show``).

What they share: :mod:`~.present` (what any route shows of a result: its files, their note,
its card; the one place a result becomes visible), :mod:`bot.genapi.downloads` (the files,
streamed and bounded), :mod:`~.sending` (nonces, the card's old form, Discord's answers
classified), :mod:`~.places` (where a job's card is), :mod:`~.reach` (servers and channels that
cannot be reached, upload limits), :mod:`~.progress` (a pending card's edits) and
:mod:`~.context`.
"""

from bot.discord.delivery.dispatch import DiscordAnnouncer
from bot.discord.delivery.sending import (
    INVALID_FORM_BODY,
    NONCE_ROUTES,
    classify,
    delivery_nonce,
    send_card,
)
from bot.genapi.downloads import (
    TooLarge,
    download,
    download_to,
    file_name,
    format_bytes,
)

__all__ = [
    "INVALID_FORM_BODY",
    "NONCE_ROUTES",
    "DiscordAnnouncer",
    "TooLarge",
    "classify",
    "delivery_nonce",
    "download",
    "download_to",
    "file_name",
    "format_bytes",
    "send_card",
]
