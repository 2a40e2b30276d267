"""Discord's part of ✨ Enhance: the rewrite shown with both prices, and the member's choice.

``/image enhance:true``, ``/video enhance:true`` and a result's Enhance button come here
(:func:`start_enhance`) with an interaction deferred ephemerally. The rewrite is one service
call (:meth:`bot.services.creative.CreativeService.enhance`: a text charge, nothing else); the
member then sees, ephemerally, the rewritten prompt, what the rewrite cost and what the
generation costs, and chooses (:class:`EnhanceChoice`, open :data:`ENHANCE_SECONDS`):

* **Use it**: the generation with the rewrite, through its command's path (a video above the
  server's threshold asks to confirm as usual);
* **Edit**: a form prefilled with the rewrite; its submission is generated;
* **Keep mine**: the generation with the member's own prompt;
* **Cancel**: nothing more is spent.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import discord

from bot.discord.choices import ChoiceOption, OneChoice, choice_view
from bot.discord.render.text import truncate
from bot.discord.request_flows import (
    Interaction,
    InteractionDesk,
    private_results,
    start_image,
    start_video,
)
from bot.discord.tree import PUBLIC_DEFER, AdmittedModal, answer_error
from bot.i18n import N_, _, money, number
from bot.services.creative import Enhanced, EnhanceOutcome
from bot.services.generation import MAX_PROMPT_LENGTH, ImageOptions, Requester, VideoOptions
from bot.services.submissions import Rewritten

ENHANCE_SECONDS = 600.0
"""How long the choice after a rewrite stays open."""

SHOWN_PROMPT_CHARS = 1500
"""The most of a rewrite shown in the message (Discord: 2000 characters); all of it is used."""

ALREADY_CHOSEN = N_("You chose already; the request is on its way.")


def price_text(cents: Decimal | None) -> str:
    """An amount for the member: ``$0.03``, or "price unknown"."""
    return _("price unknown") if cents is None else money(cents)


def enhance_text(outcome: EnhanceOutcome, takes: int = 1) -> str:
    """The ephemeral message after a rewrite: the prompt, its price, the generation's price."""
    generation = price_text(outcome.generation_cents)
    if takes > 1:
        generation = _("{price} for {count} takes", price=generation, count=number(takes))
    rewrite = money(outcome.rewrite_cents)
    if not isinstance(outcome, Enhanced):
        return _(
            "The rewrite used a term this server blocks, so it is not shown; your prompt is "
            "unchanged. The rewrite cost {rewrite}. Generating costs {generation}.",
            rewrite=rewrite,
            generation=generation,
        )
    shown = truncate(outcome.prompt, SHOWN_PROMPT_CHARS)
    return _(
        "✨ **Rewritten prompt**\n>>> {prompt}\n\nThe rewrite cost {rewrite} (charged). "
        "Generating costs {generation}, with either prompt; nothing more is spent until "
        "you choose.",
        prompt=shown,
        rewrite=rewrite,
        generation=generation,
    )


class EnhanceChoice(OneChoice):
    """Use it / Edit / Keep mine / Cancel after a rewrite (a :class:`OneChoice`).

    Args:
        who: the member who asked, and where.
        options: the generation's options with the member's own prompt.
        outcome: the rewrite.
        takes: the generation's takes.
    """

    USE = "use"
    EDIT = "edit"
    KEEP = "keep"

    def __init__(
        self,
        who: Requester,
        options: ImageOptions | VideoOptions,
        outcome: EnhanceOutcome,
        *,
        takes: int = 1,
    ) -> None:
        super().__init__(who)
        self.options = options
        self.outcome = outcome
        self.takes = takes

    def buttons(self) -> list[ChoiceOption]:
        """The buttons: Use it and Keep mine show the generation's price."""
        price = price_text(self.outcome.generation_cents)
        keep = ChoiceOption(self.KEEP, _("Keep mine · {price}", price=price))
        cancel = ChoiceOption(self.CANCEL, _("Cancel"))
        if not isinstance(self.outcome, Enhanced):
            return [keep, cancel]
        return [
            ChoiceOption(self.USE, _("Use it · {price}", price=price), discord.ButtonStyle.success),
            ChoiceOption(self.EDIT, _("Edit")),
            keep,
            cancel,
        ]

    def already(self, option: str) -> str:
        """Whatever was chosen first, the request is on its way."""
        return _(ALREADY_CHOSEN)

    async def chosen(self, interaction: Interaction, option: str) -> None:
        """Generate with the chosen prompt, open the form, or stop."""
        if option == self.EDIT and isinstance(self.outcome, Enhanced):
            await EnhanceEditModal(self, self.outcome.prompt).show(interaction)
            return
        if option == self.CANCEL:
            await interaction.response.edit_message(
                content=_("Cancelled; nothing more was charged."), view=None
            )
            return
        prompt = self.options.prompt
        if option == self.USE and isinstance(self.outcome, Enhanced):
            prompt = self.outcome.prompt
        await generate(interaction, self.who, self.options, prompt, takes=self.takes)


class EnhanceEditModal(AdmittedModal, title=N_("Edit the prompt")):
    """The rewrite, prefilled, to change before it is generated.

    Args:
        choice: the choice it came from (its member, options and takes).
        prompt: the rewrite.
    """

    def __init__(self, choice: EnhanceChoice, prompt: str) -> None:
        super().__init__()
        self.choice = choice
        self.prompt: discord.ui.TextInput[EnhanceEditModal] = discord.ui.TextInput(
            label=_("Prompt"),
            style=discord.TextStyle.paragraph,
            max_length=MAX_PROMPT_LENGTH,
            default=prompt[:MAX_PROMPT_LENGTH],
        )
        self.add_item(self.prompt)

    async def on_submit(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Generate the submitted prompt through its command's path."""
        choice = self.choice
        await generate(
            interaction, choice.who, choice.options, self.prompt.value, takes=choice.takes
        )

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


async def generate(
    interaction: Interaction,
    who: Requester,
    options: ImageOptions | VideoOptions,
    prompt: str,
    *,
    takes: int = 1,
) -> None:
    """Generate ``options`` with ``prompt`` as its command would, answering ``interaction``.

    A video's answer replaces the choice's (ephemeral) message, its card going where the
    command's would; an image's is a new message, public unless the member has private
    results on, as ``/image``'s.
    """
    chosen = dataclasses.replace(options, prompt=prompt)
    if isinstance(chosen, VideoOptions):
        await interaction.response.defer()
        await start_video(interaction, who, chosen, takes=takes)
        return
    private = await private_results(interaction.client, who.user_id)
    interaction.extras[PUBLIC_DEFER] = not private
    await interaction.response.defer(thinking=True, ephemeral=private)
    await start_image(interaction, who, chosen, takes=takes)


async def start_enhance(
    interaction: Interaction,
    who: Requester,
    options: ImageOptions | VideoOptions,
    *,
    takes: int = 1,
) -> None:
    """Rewrite the prompt and show the choice; ``interaction`` must be deferred ephemerally.

    Raises:
        ValidationFailed, PromptBlocked, NoApiKeyConfigured, BudgetExceeded: before the
            rewrite's call (nothing spent); GenAPIError: the rewrite's call failed.
    """
    bot = interaction.client
    outcome = await bot.services.creative.enhance(
        who, options, desk=InteractionDesk(interaction, who), takes=takes
    )
    await show_rewrite(interaction, who, Rewritten(outcome, options, takes))


async def show_rewrite(interaction: Interaction, who: Requester, rewritten: Rewritten) -> None:
    """Show a paid rewrite with both prices, and the member's choice (:class:`EnhanceChoice`).

    ``interaction`` must be deferred ephemerally: the choice replaces its response.
    """
    takes = rewritten.takes
    choice = EnhanceChoice(who, rewritten.options, rewritten.outcome, takes=takes)
    view = choice_view(interaction.client.choices.open(choice, ENHANCE_SECONDS), choice.buttons())
    text = enhance_text(rewritten.outcome, takes)
    await interaction.edit_original_response(content=text, view=view)


__all__ = ["EnhanceChoice", "enhance_text", "generate", "show_rewrite", "start_enhance"]
