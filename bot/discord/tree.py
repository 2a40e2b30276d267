"""The command tree: the one place an app-command error becomes the user's sentence."""

from __future__ import annotations

import logging
import re
import secrets
import time
import warnings
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

import discord
from discord import app_commands
from discord.webhook.async_ import AsyncWebhookAdapter, async_context

from bot.discord.command_access import interaction_refusal
from bot.discord.credits import note_offer, premium_buttons
from bot.errors import BotError, CreditsNeeded, user_message
from bot.genapi.errors import GenAPIError
from bot.i18n import N_, _, set_locale
from bot.ops.logs import set_context

if TYPE_CHECKING:
    from bot.clock import Clock
    from bot.ops.metrics import Metrics

log = logging.getLogger(__name__)


class CommandHost(Protocol):
    """What the command tree and the admission guard use of the bot (``GenBot``).

    A port: the bot builds its tree (``tree_cls``) and every entry point passes the guard, so
    this module imports nothing of the bot; ``interaction.client`` is read through this.
    """

    @property
    def metrics(self) -> Metrics:
        """The process's metrics (commands by outcome, acknowledgement times)."""

    @property
    def shard_id(self) -> int | None:
        """The shard this process runs, for the log context."""

    def admit_command(self) -> bool:
        """Count the current task as an admitted command; False while shutting down."""


PUBLIC_DEFER = "public_defer"
"""``interaction.extras`` flag: the command deferred publicly, so an error replaces the public
"thinking…" message with an ephemeral one rather than showing it to everyone."""


def sentence_for(error: Exception) -> str:
    """Return the ephemeral sentence for ``error``; log what the user cannot act on.

    Takes app-command errors and the raw exceptions of views and modals alike.
    """
    original = error.original if isinstance(error, app_commands.CommandInvokeError) else error
    if isinstance(original, BotError | GenAPIError):
        if isinstance(original, GenAPIError):
            log.info("upstream refused a command: %s", original)
        return user_message(original, now=time.time())
    if isinstance(error, app_commands.MissingPermissions):
        return _("You need the Manage Server permission for this.")
    if isinstance(error, app_commands.NoPrivateMessage):
        return _("This command works in servers only.")
    if isinstance(error, app_commands.TransformerError):
        return _("That option is not valid.")
    if isinstance(error, app_commands.CheckFailure):
        # Our checks raise with a sentence marked for the catalogue (N_), read here.
        return _(str(error)) if str(error) else _("That option is not valid.")
    error_id = secrets.token_hex(4)
    log.error("command failed (error id %s)", error_id, exc_info=original)
    shown = f"`{error_id}`"
    return _(
        "Something went wrong on our side (error id {error_id}); it has been logged.",
        error_id=shown,
    )


CHARGED = "charged"
"""``interaction.extras`` flag (``bot.discord.request_flows.charged``): the service charged for this
interaction's request and the charge is recorded; from then on the member is never told that
it failed."""

CHARGED_ANYWAY = N_(
    "Your request went through (it was charged); its result is shown here, in this channel "
    "or by DM, and `/jobs` lists videos and images."
)
"""The answer to an error raised after a charge: the result is coming, so no "failed"."""

ACTIONS = frozenset({discord.InteractionType.component, discord.InteractionType.modal_submit})
"""Interactions Discord lets through whatever the member's command permissions: clicks, forms."""

RESTARTING = N_("The bot is restarting; try again in a minute.")
"""The answer to a command that arrives during a shutdown (it is not run)."""


async def admit(interaction: discord.Interaction[Any], *, answer: bool = True) -> bool:
    """The one admission guard of every entry point: command, button, modal.

    Counts the interaction's task as in flight (``GenBot.admit_command``), so that a shutdown
    waits for it to record its charge and answer; while shutting down it is refused instead,
    answered "restarting" (ephemeral) when ``answer``, and must not run: nothing reaches the
    service and nothing is charged. It runs in the task that then runs the
    callback (discord.py runs an interaction's check and callback in one task), through
    :meth:`GenTree.interaction_check`, :class:`AdmittedModal`, the result buttons'
    ``interaction_check`` (``cogs/results.py``) and the choice buttons
    (:mod:`bot.discord.choices`).

    A button or a form is held to the rule Discord applies to commands only
    (:func:`bot.discord.command_access.interaction_refusal`): a timed-out member, or one
    without Use Application Commands in the channel, is refused with one ephemeral sentence
    (the acknowledgement itself), and nothing runs or is charged.

    Returns:
        Whether the interaction may run.
    """
    # The member's own language for every answer of this interaction's task (the check and
    # the callback run in one task); a public card sets the server's around its rendering.
    set_locale(member_locale(interaction))
    if interaction.type in ACTIONS:
        refused = interaction_refusal(interaction)
        if refused is not None:
            if answer:
                await send_ephemeral(interaction, refused)
            return False
    host: CommandHost = interaction.client
    if host.admit_command():
        return True
    if answer:
        await send_ephemeral(interaction, _(RESTARTING))
    return False


def member_locale(interaction: discord.Interaction[Any]) -> str | None:
    """The member's client language (Discord sends it with every interaction but a ping)."""
    locale = getattr(interaction, "locale", None)
    return locale.value if isinstance(locale, discord.Locale) else None


FORM_SECONDS = 3600.0
"""How long a form waits for its submission. Discord never closes a modal by itself, and
discord.py would keep an unsubmitted one (a member who dismissed it) for ever."""

BUTTON_GONE = N_("This button no longer works (the bot was updated); run the command again.")

FORM_EXPIRED = N_(
    "This form is no longer open (it was open over an hour, or the bot restarted); open it again."
)


class OpenForms:
    """The forms (modals) this process showed and still waits for, by custom id.

    discord.py drops a submission of a form it does not hold, and the member would see "This
    interaction failed"; the bot answers it :data:`FORM_EXPIRED` instead
    (``GenBot._unanswered``), for which it must know the forms it holds.

    Args:
        clock: the bot's clock (monotonic seconds).
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}  # in opening order: all live FORM_SECONDS

    def opened(self, custom_id: str) -> None:
        """Record a form shown now; forget those past their time."""
        now = self._clock.monotonic()
        while self._until:
            first, until = next(iter(self._until.items()))
            if until > now:
                break
            del self._until[first]
        self._until[custom_id] = now + FORM_SECONDS

    def is_open(self, custom_id: str) -> bool:
        """Whether this process showed the form ``custom_id`` and still waits for it."""
        return self._until.get(custom_id, 0.0) > self._clock.monotonic()


class ActionButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=r"gb:(?P<action>[a-z]+):(?P<ref>[a-z][0-9]+)",
):
    """A restart-safe button ``gb:<action>:<ref>`` whose click passes :func:`admit` first.

    The base of the cogs' result, sequence and showcase buttons; each subclass names its own
    custom-id ``template`` (with the groups ``action`` and ``ref``) and its ``callback``, and is
    the one registered (``add_dynamic_items``). This class's own template only satisfies
    discord.py, which requires one of every ``DynamicItem``; it is never registered.

    Args:
        action: the button's action, also its label until the card renders it.
        ref: what it acts on (``j<job id>``, ``r<result request id>``, ``s<entry id>``).
    """

    def __init__(self, action: str, ref: str) -> None:
        super().__init__(discord.ui.Button(custom_id=f"gb:{action}:{ref}", label=action))
        self.action = action
        self.ref = ref

    @classmethod
    async def from_custom_id(  # type: ignore[override]
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Button[discord.ui.View],
        match: re.Match[str],
    ) -> Self:
        """Rebuild the button from its custom id (discord.py calls this on every click)."""
        return cls(match["action"], match["ref"])

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Admit the click as every entry point is (:func:`admit`)."""
        return await admit(interaction)


class ActionSelect(
    discord.ui.DynamicItem[discord.ui.Select[discord.ui.View]],
    template=r"gb:(?P<action>[a-z]+):(?P<ref>[a-z][0-9]+)",
):
    """A restart-safe select ``gb:<action>:<ref>`` whose choice passes :func:`admit` first.

    The select :class:`ActionButton` is for buttons: the base of the Report select under a
    result and of a takes card's select. Each subclass names its :attr:`action` (the custom
    id's middle part), its own custom-id ``template`` (with the group ``ref``) and its
    ``callback``, and is the one registered (``add_dynamic_items``). This class's own template
    only satisfies discord.py, which requires one of every ``DynamicItem``; it is never
    registered.

    Args:
        ref: what it acts on (``j<job id>``, ``r<result request id>``).
    """

    action: ClassVar[str] = "select"
    """The custom id's action: ``gb:<action>:<ref>`` (``report``, ``take``)."""

    def __init__(self, ref: str) -> None:
        super().__init__(discord.ui.Select(custom_id=f"gb:{self.action}:{ref}"))
        self.ref = ref

    @classmethod
    async def from_custom_id(  # type: ignore[override]
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Select[discord.ui.View],
        match: re.Match[str],
    ) -> Self:
        """Rebuild the select from its custom id (discord.py calls this on every choice)."""
        return cls(match["ref"])

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Admit the choice as every entry point is (:func:`admit`)."""
        return await admit(interaction)

    @staticmethod
    def chosen(interaction: discord.Interaction[Any]) -> str:
        """The value the member chose, as the interaction carries it; "" when none."""
        data: Any = interaction.data or {}
        values = list(data.get("values") or [])
        return str(values[0]) if values else ""


class AdmittedModal(discord.ui.Modal):
    """A modal whose submission passes :func:`admit` first.

    A modal opened before a shutdown may be submitted during it: refused then, it starts no
    paid call that nothing would wait for. It waits :data:`FORM_SECONDS` for its submission.
    """

    def __init__(self, *, title: str = discord.utils.MISSING) -> None:
        super().__init__(title=title, timeout=FORM_SECONDS)
        # The title and the class's own fields are written in English (marked N_); the form
        # is built for one member, in that member's language.
        self.title = _(self.title)
        for item in self.children:
            if isinstance(item, discord.ui.TextInput):
                # discord.py 2.7 deprecates a text input's own label for discord.ui.Label; the
                # forms that still give one keep it, translated, without a warning each time.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    if item.label:
                        item.label = _(item.label)
                if item.placeholder:
                    item.placeholder = _(item.placeholder)

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Refuse (ephemerally, "restarting") while the bot shuts down."""
        return await admit(interaction)

    async def show(self, interaction: discord.Interaction[Any]) -> None:
        """Answer ``interaction`` with this form, listening for its submission first.

        discord.py's ``send_modal`` registers the modal only once the callback's HTTP answer
        has been read, but Discord delivers the submission on the gateway, another connection:
        when the event loop was busy, the submission can be read first and would be dropped
        (the member sees "This interaction failed"). Registered before the callback, it is
        never dropped; a callback that fails takes the registration back.

        Raises:
            discord.HTTPException: Discord refused the callback (nothing stays registered).
        """
        interaction.client.forms.opened(self.custom_id)
        # No public call registers a form that is not "persistent" (a text input without a
        # custom id); the connection's view store is where send_modal itself puts it.
        interaction.client._connection.store_view(self)
        try:
            await interaction.response.send_modal(self)
        except BaseException:
            self.stop()  # removes it from the store again
            raise


class AckTimer(AsyncWebhookAdapter):
    """discord.py's webhook adapter, timing an interaction's first response (its ack).

    discord.py sends every interaction response through the adapter in its ``async_context``
    context variable; setting it in a command's own task instruments that command alone. The
    adapter shares the default one's rate-limit locks.

    Args:
        interaction: the interaction whose acknowledgement is timed.
        metrics: where the time goes (``genbot_interaction_ack_seconds``).
    """

    def __init__(self, interaction: discord.Interaction[Any], metrics: Metrics) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._locks = async_context.get()._locks
        self._interaction = interaction
        self._metrics = metrics
        self._timed = False

    async def create_interaction_response(self, *args: Any, **kwargs: Any) -> Any:
        """Send the response as discord.py would, then record the ack time once."""
        result = await super().create_interaction_response(*args, **kwargs)
        if not self._timed:
            self._timed = True
            # From the interaction's snowflake: the 3 s Discord allows count from there.
            seconds = (discord.utils.utcnow() - self._interaction.created_at).total_seconds()
            self._metrics.ack_seconds.labels(command_name(self._interaction)).observe(
                max(0.0, seconds)
            )
        return result


def command_name(interaction: discord.Interaction[Any]) -> str:
    """The full name of the interaction's command (``config api-key``); ``other`` if none."""
    command = interaction.command
    return command.qualified_name if command is not None else "other"


class GenTree(app_commands.CommandTree[Any]):
    """Command tree whose :meth:`on_error` answers every failure with one ephemeral sentence.

    Also counts commands by name and outcome, times their acknowledgement and sets the log
    context (interaction, guild, user, shard) of the command's task.
    """

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self._host: CommandHost = client
        client.add_listener(self._completed, "on_app_command_completion")

    @property
    def _metrics(self) -> Metrics:
        return self._host.metrics

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Run a command only while the bot is not shutting down (then say so, ephemerally)."""
        command = interaction.type is discord.InteractionType.application_command
        if command:
            # The command runs in a task of its own (discord.py), so this context is its own.
            set_context(
                interaction_id=interaction.id,
                guild_id=interaction.guild_id,
                user_id=interaction.user.id,
                shard=self._host.shard_id if self._host.shard_id is not None else 0,
            )
            async_context.set(AckTimer(interaction, self._metrics))
        if not command:
            return await admit(interaction, answer=False)  # autocomplete: no answer to give
        if await admit(interaction):
            return True
        self._metrics.commands.labels(command_name(interaction), "restarting").inc()
        return False

    async def _completed(
        self,
        interaction: discord.Interaction[Any],
        command: app_commands.Command[Any, ..., Any] | app_commands.ContextMenu,
    ) -> None:
        self._metrics.commands.labels(command.qualified_name, "ok").inc()

    async def on_error(
        self, interaction: discord.Interaction[Any], error: app_commands.AppCommandError
    ) -> None:
        """Tell the user what went wrong, ephemerally, whatever state the interaction is in."""
        original = error.original if isinstance(error, app_commands.CommandInvokeError) else error
        expected = isinstance(
            original,
            BotError | GenAPIError | app_commands.TransformerError | app_commands.CheckFailure,
        )
        outcome = "refused" if expected else "error"
        self._metrics.commands.labels(command_name(interaction), outcome).inc()
        await answer_error(interaction, error)


async def answer_error(interaction: discord.Interaction[Any], error: Exception) -> None:
    """Answer an interaction that raised: its one ephemeral sentence (:func:`sentence_for`).

    After a charge (``interaction.extras[CHARGED]``) the request did not fail: the member is
    told it went through (:data:`CHARGED_ANYWAY`) and the response, which may hold the paid
    result, is left as it is; the error is logged with an id for the operator.
    """
    if not interaction.extras.get(CHARGED):
        original = error.original if isinstance(error, app_commands.CommandInvokeError) else error
        # A balance too small to pay: the packs on Discord's buy buttons, the way forward.
        view = None
        if isinstance(original, CreditsNeeded):
            view = premium_buttons(original.packs)
            await note_offer(interaction)  # a purchase from here shows in this server's Ledger
        await send_ephemeral(interaction, sentence_for(error), view=view)
        return
    original = error.original if isinstance(error, app_commands.CommandInvokeError) else error
    log.error("error after a charge (error id %s)", secrets.token_hex(4), exc_info=original)
    try:
        if interaction.response.is_done():
            await interaction.followup.send(
                _(CHARGED_ANYWAY), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
            )
        else:
            await interaction.response.send_message(
                _(CHARGED_ANYWAY), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
            )
    except discord.HTTPException as exc:
        log.warning("could not deliver a message: %s", exc)


async def send_ephemeral(
    interaction: discord.Interaction[Any], text: str, *, view: discord.ui.View | None = None
) -> None:
    """Answer ``interaction`` with ``text`` visible only to the user, whether or not it deferred.

    ``view``: components shown with it (the premium buttons of credit packs); None: none.

    After a public deferral the "thinking…" message is deleted first, so that the error is not
    left for everyone to see (Discord cannot make a deferred response ephemeral afterwards).
    """
    try:
        extra: dict[str, Any] = {} if view is None else {"view": view}
        if not interaction.response.is_done():
            await interaction.response.send_message(
                text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none(), **extra
            )
            return
        if interaction.extras.get(PUBLIC_DEFER):
            await interaction.delete_original_response()
        await interaction.followup.send(
            text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none(), **extra
        )
    except discord.HTTPException as exc:
        log.warning("could not deliver an error message: %s", exc)
