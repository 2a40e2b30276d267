"""A server's policy: role tiers, model access, blocked terms; pure rules.

No I/O here: :class:`bot.services.billing.Billing` applies :func:`member_policy` inside its
reservation transaction, the generation service applies :func:`find_blocked_term` before any
reservation, and ``/config`` parses admins' input with :func:`parse_models` and
:func:`normalise_term`. Money is whole ``int`` cents; None means unlimited.

Blocked terms are compared by Unicode's confusable *skeleton* (UTS #39 section 4, with Unicode's
``confusables.txt``: :mod:`bot.services.confusables`), so a term matches its look-alikes
(``bаd`` with a Cyrillic ``а``, ``paypaI`` with a capital ``I``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from bot.domain import UNLIMITED, ModelLists, Tier
from bot.errors import ValidationFailed
from bot.i18n import N_, money
from bot.services import confusables

ALL_MODELS = "*"

"""A model pattern that matches every model (admins type ``all``)."""

MAX_PATTERNS = 50
"""Model ids or prefixes in one list; more is not a policy anyone can read."""

MAX_TERM_LENGTH = 100
"""Characters in a blocked term (after normalisation)."""

_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._:/+-]{0,99}$")
"""A catalogue id or prefix as the spec's examples show them (``vendor/model-name``)."""

SERVER_DEFAULT = "server default"
"""The source of a limit of a member without a tier role, in refusals."""


def _visible_nfkc(text: str) -> str:
    """``text`` in NFKC, without format characters (Cf), whitespace collapsed to one space."""
    nfkc = unicodedata.normalize("NFKC", text)
    visible = "".join(ch for ch in nfkc if unicodedata.category(ch) != "Cf")
    return " ".join(visible.split())


def normalise_term(text: str) -> str:
    """Return ``text`` as blocked terms are stored and shown.

    Unicode NFKC, case-folded, zero-width (format, category Cf) characters removed, whitespace
    collapsed to single spaces. NFKC folds compatibility forms (full-width letters,
    ligatures) into plain ones, so ``ｂａｄ`` and ``bad`` compare equal (Unicode UAX #15).
    Look-alike letters are folded when comparing (:func:`find_blocked_term`).
    """
    return _visible_nfkc(text).casefold()


UNSPACED_SCRIPTS = frozenset(
    {"Hani", "Hira", "Kana", "Bopo", "Yiii", "Thai", "Laoo", "Khmr", "Mymr", "Tibt", "Tale"}
)
"""ISO 15924 codes of scripts written without spaces between words (Chinese, Japanese, Thai,
Lao, Khmer, Myanmar, Tibetan...): a word of these has no boundary to find, so a term in them
matches anywhere (UAX #29 needs a dictionary to find their words)."""

BLOCKED_TERMS_RULE = (
    "Refuse prompts with it in any case or look-alike letters: as whole words; in CJK/Thai anywhere"
)
"""What ``/config blocked-terms add`` promises (Discord: at most 100 characters)."""


def skeleton(text: str) -> str:
    """Return the confusable skeleton (UTS #39 section 4) of ``text`` case-folded.

    Two strings that look alike have the same skeleton (``bаd`` with a Cyrillic ``а`` and
    ``bad``, ``rn`` and ``m``, ``1`` and ``l``); characters that show nothing (variation
    selectors, fillers: Default_Ignorable_Code_Point) are left out.
    """
    folded = unicodedata.normalize("NFC", text).casefold()
    return confusables.skeleton(folded)


def _folded_forms(text: str) -> set[str]:
    """Return ``text`` as terms are looked for in it.

    Its :func:`skeleton`, and the skeleton of its raw skeleton, since a capital may look like
    another small letter (``paypaI``: ``I`` is an ``l``, which case folding makes an ``i``).
    """
    visible = _visible_nfkc(text)
    return {skeleton(visible), skeleton(confusables.skeleton(visible))}


def _unspaced(ch: str) -> bool:
    return confusables.in_scripts(ch, UNSPACED_SCRIPTS)


def _word_char(ch: str) -> bool:
    """Whether ``ch`` continues a word written with spaces (a letter, digit, mark or ``_``)."""
    if ch == "_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
        return not _unspaced(ch)
    return False


def find_blocked_term(text: str, terms: Iterable[str]) -> str | None:
    """Return the first of ``terms`` (already normalised) that ``text`` contains, or None.

    Both are compared by :func:`skeleton` after :func:`normalise_term` (case, width, hidden
    characters, look-alike letters). A term matches whole words only (``ass`` does not block
    ``class``), unless it holds a character of a script written without spaces
    (:data:`UNSPACED_SCRIPTS`): then anywhere (``暴力`` blocks ``这是暴力视频``). A neighbour of
    such a script is a boundary too (``bad`` in ``这是bad视频``).
    """
    forms = _folded_forms(text)
    for term in terms:
        needle = skeleton(term)
        anywhere = any(_unspaced(ch) for ch in term)
        if needle and any(_contains(form, needle, anywhere=anywhere) for form in forms):
            return term
    return None


def _contains(folded: str, needle: str, *, anywhere: bool) -> bool:
    start = folded.find(needle)
    while start != -1:
        end = start + len(needle)
        if anywhere or (
            (start == 0 or not _word_char(folded[start - 1]))
            and (end == len(folded) or not _word_char(folded[end]))
        ):
            return True
        start = folded.find(needle, start + 1)
    return False


def parse_models(text: str) -> tuple[str, ...]:
    """Read a comma-separated list of model ids or prefixes, or ``all``.

    Returns:
        The patterns, lower-cased, de-duplicated in order; ``("*",)`` for ``all``.

    Raises:
        ValidationFailed: an entry is not shaped like a model id, or there are too many.
    """
    entries = [e.strip().casefold() for e in text.split(",") if e.strip()]
    if not entries:
        raise ValidationFailed(N_("Give model ids or prefixes separated by commas, or `all`."))
    if "all" in entries or ALL_MODELS in entries:
        return (ALL_MODELS,)
    if len(entries) > MAX_PATTERNS:
        raise ValidationFailed(
            N_("At most {max_patterns} models or prefixes."), max_patterns=MAX_PATTERNS
        )
    for entry in entries:
        if not _PATTERN.match(entry):
            raise ValidationFailed(
                N_("`{value}` is not a model id or prefix (such as `motion-pro/`)."),
                value=entry[:40],
            )
    return tuple(dict.fromkeys(entries))


def model_matches(pattern: str, model_id: str) -> bool:
    """Whether ``pattern`` covers ``model_id``.

    ``*`` covers all; a pattern ending in a separator (``/``, ``-``, ``_``, ``.``, ``:``) is
    a prefix (``acme/image-`` covers ``acme/image-2``); any other is one exact id.
    """
    model = model_id.casefold()
    if pattern == ALL_MODELS:
        return True
    if not pattern[-1].isalnum():
        return model.startswith(pattern)
    return model == pattern


def _any(patterns: Iterable[str], model_id: str) -> bool:
    return any(model_matches(p, model_id) for p in patterns)


def server_allows(lists: ModelLists, model_id: str) -> bool:
    """Whether the server-wide model list lets members without a tier use ``model_id``.

    Allowed: the allow list is empty or covers it, and the block list does not.
    """
    if lists.allowed and not _any(lists.allowed, model_id):
        return False
    return not _any(lists.blocked, model_id)


@dataclass(frozen=True, slots=True)
class Allowance:
    """One limit of a member's effective policy.

    Attributes:
        value: whole cents (or a count, for videos); None = unlimited.
        source: where it comes from, for people: ``"role Patron"`` or ``"server default"``.
    """

    value: int | None
    source: str


@dataclass(frozen=True, slots=True)
class MemberPolicy:
    """What one member may spend and use: the most generous of their tiers, per limit.

    Attributes:
        daily: cents per UTC day.
        monthly: cents per UTC calendar month (the member's own, not the server's budget).
        videos_at_once: pending videos (value never None: a cap always applies).
        tiers: the member's tiers, most generous first; empty = the server defaults.
        lists: the server-wide model list (for tiers without models of their own).
    """

    daily: Allowance
    monthly: Allowance
    videos_at_once: Allowance
    tiers: tuple[Tier, ...]
    lists: ModelLists

    @property
    def tier_role_id(self) -> int | None:
        """The role of the member's main tier (most generous daily, then monthly); None."""
        return self.tiers[0].role_id if self.tiers else None

    def allows(self, model_id: str) -> bool:
        """Whether the member may use ``model_id``: the union of their tiers' models."""
        if not self.tiers:
            return server_allows(self.lists, model_id)
        for tier in self.tiers:
            if tier.models is None:
                if server_allows(self.lists, model_id):
                    return True
            elif _any(tier.models, model_id):
                return True
        return False


def _rank(value: int | None) -> float:
    return float("inf") if value is None else value


def _resolve(own: int | None, default: int | None) -> int | None:
    """A tier's allowance: its own (UNLIMITED = None), or the default when it set none."""
    if own is None:
        return default
    return None if own == UNLIMITED else own


def _best(candidates: list[Allowance]) -> Allowance:
    # Stable: among equals the first (the server default, then tiers by role) is named.
    return max(candidates, key=lambda a: _rank(a.value))


def member_policy(
    tiers: Iterable[Tier],
    role_ids: Collection[int],
    *,
    daily_default: int | None,
    videos_default: int,
    lists: ModelLists,
) -> MemberPolicy:
    """Return a member's effective policy (the most generous tier per limit).

    Args:
        tiers: the guild's tiers.
        role_ids: the member's role ids (from the interaction's member object).
        daily_default: the server's daily budget per member, cents; None = unlimited.
        videos_default: the server's cap on a member's pending videos.
        lists: the server-wide model list.

    A tier's limit left unset means the server default for it; a member with no tier role
    gets the server defaults for everything (and no monthly limit of their own).
    """
    mine = [t for t in tiers if t.role_id in role_ids]
    if not mine:
        return MemberPolicy(
            Allowance(daily_default, SERVER_DEFAULT),
            Allowance(None, SERVER_DEFAULT),
            Allowance(videos_default, SERVER_DEFAULT),
            (),
            lists,
        )

    def each(own: list[int | None], default: int | None) -> list[Allowance]:
        return [
            Allowance(_resolve(value, default), f"role {tier.role_name}")
            for value, tier in zip(own, mine, strict=True)
        ]

    daily = _best(each([t.daily_per_user_cents for t in mine], daily_default))
    monthly = _best(each([t.monthly_per_user_cents for t in mine], None))
    videos = max(
        (Allowance(t.videos_at_once or videos_default, f"role {t.role_name}") for t in mine),
        key=lambda a: _rank(a.value),
    )
    ranked = sorted(
        mine,
        key=lambda t: (
            -_rank(_resolve(t.daily_per_user_cents, daily_default)),
            -_rank(_resolve(t.monthly_per_user_cents, None)),
            t.role_id,
        ),
    )
    return MemberPolicy(daily, monthly, videos, tuple(ranked), lists)


def describe_allowance(cents: int | None, *, unset: str = "server default") -> str:
    """Render a tier's stored allowance for people (``UNLIMITED``, None = ``unset``)."""
    if cents is None:
        return unset
    if cents == UNLIMITED:
        return "unlimited"
    return money(cents)


def describe_models(models: tuple[str, ...] | None, *, unset: str = "server list") -> str:
    """Render a model list for people: ``all``, ``unset`` (None), or the patterns."""
    if models is None:
        return unset
    if models == (ALL_MODELS,):
        return "all"
    return ", ".join(f"`{m}`" for m in models) or "none"
