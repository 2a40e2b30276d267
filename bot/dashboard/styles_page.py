"""The server's Styles page: each style's suffix, tiers and references as thumbnails.

``/servers/<id>/styles`` (docs/dashboard.md, docs/creative.md). A style's references are the
Discord messages that hold them; the page shows the thumbnail the bot made of each when the
style was added (``style_thumbnails``, served by ``/thumbs/styles/...`` from the bot's own
store), so a visitor makes the bot fetch no picture. Whether a reference's message is still
there is asked through the dashboard's Discord port, cached (``CachingDirectory``: a message
once until its URLs expire, a 403 or 404 remembered ten minutes), and a reference whose
message is gone is shown as such. An editor removes a style here as with ``/config style
remove`` (the settings form pattern: token, origin, write limit, page lock, optimistic
``base``; audited ``style <name>``, ``via="web"``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from bot.dashboard.forms import Posted, SettingsForm, settings_form
from bot.domain import Actor, AuditEntry, ImageRef, MessageUnreachable, Style
from bot.errors import ValidationFailed
from bot.i18n import N_

log = logging.getLogger(__name__)

NO_SUCH_STYLE: Final = N_("That style is not in this server (removed already?).")


def styles_scope(what: str) -> bool:
    """The audited settings of the Styles page: the server's styles (``style <name>``)."""
    return what.startswith("style ")


@settings_form
class StylesForm(SettingsForm):
    """``/servers/<id>/styles``: the server's styles; an editor removes one.

    Each style: its name, suffix, the tiers that may use it (every member when none) and its
    references, each its kept thumbnail, "gone" when its message is, "no preview" when no
    thumbnail was made.
    """

    name = "styles"
    path = "/servers/{guild_id}/styles"
    template = "styles.html"
    label = N_("Styles")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        creative = self.pages.services.creative
        styles = await creative.styles(self.guild_id)
        thumbs = await creative.style_thumbnails([style.id for style in styles])
        gone = await self._gone([ref for style in styles for ref in style.references])
        names = await self._role_names() if any(style.roles for style in styles) else {}
        rows = [
            {
                "style": style,
                "tiers": [names.get(role, str(role)) for role in style.roles],
                "refs": [
                    {
                        "position": position,
                        "thumb": thumbs.get((style.id, position)),
                        "gone": ref in gone,
                    }
                    for position, ref in enumerate(style.references)
                ],
            }
            for style in styles
        ]
        return {"rows": rows, "base": await self.base(styles_scope)}

    async def _role_names(self) -> dict[int, str]:
        try:
            return dict(await self.pages.app.directory.roles(self.guild_id))
        except Exception as exc:  # a name is a nicety: the id is shown
            log.info("dashboard: roles of %s not read: %s", self.guild_id, exc)
            return {}

    async def _gone(self, refs: list[ImageRef]) -> set[ImageRef]:
        """The references whose message (or file on it) Discord has no more.

        One cached question per message (``attachment_urls``); a failure other than a 403 or
        404 says nothing (the reference is shown as it was kept).
        """
        gone: set[ImageRef] = set()
        messages: dict[tuple[int, int], list[ImageRef]] = {}
        for ref in refs:
            messages.setdefault((ref.channel_id, ref.message_id), []).append(ref)
        for (channel_id, message_id), held in messages.items():
            try:
                urls = await self.pages.app.directory.attachment_urls(channel_id, message_id)
            except MessageUnreachable:
                gone.update(held)
                continue
            except Exception as exc:
                log.info("dashboard: message %s of a style not read: %s", message_id, exc)
                continue
            gone.update(ref for ref in held if ref.attachment >= len(urls))
        return gone

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Remove the posted style (``action=remove``); the entries audited."""
        name = posted.get("name")
        styles: list[Style] = await self.pages.services.creative.styles(self.guild_id)
        if posted.get("action") != "remove" or all(style.name != name for style in styles):
            raise ValidationFailed(NO_SUCH_STYLE)
        creative, guild_id = self.pages.services.creative, self.guild_id

        async def apply(actor: Actor) -> None:
            await creative.remove_style(guild_id, name, actor=actor)

        return await self.commit(posted, styles_scope, apply)
