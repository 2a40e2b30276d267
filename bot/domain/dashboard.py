"""What the web dashboard shows and keeps: sessions, ledger lines, spend buckets, results.

Money is integer micro-cents here (the ledger's own unit, ``bot.storage.money``), so that the
dashboard's sums and its CSV are exact without a conversion per row; times are UTC epoch
seconds; ids are Discord snowflakes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GuildRef:
    """A server as Discord listed it for the member at sign-in (``GET /users/@me/guilds``).

    Attributes:
        id: the guild id.
        name: its name then.
        permissions: the member's permission bits there (Discord's ``permissions`` field).
        owner: whether the member owns it.
    """

    id: int
    name: str
    permissions: int
    owner: bool = False


@dataclass(frozen=True, slots=True)
class DashboardSession:
    """A signed-in browser: one row of ``dashboard_sessions``.

    Attributes:
        user_id: the member.
        user_name: their Discord name at sign-in.
        guilds: the servers Discord listed for them at sign-in.
        created_at: sign-in time, UTC epoch seconds.
        last_seen_at: the last request seen, UTC epoch seconds (within a minute).
    """

    user_id: int
    user_name: str
    guilds: tuple[GuildRef, ...]
    created_at: float
    last_seen_at: float


@dataclass(frozen=True, slots=True)
class LedgerFilter:
    """Which ledger lines a page or an export shows; None: any.

    Attributes:
        user_id: one member's charges.
        model: one model.
        kind: ``video``, ``image`` or ``text``.
        since: at or after, UTC epoch seconds.
        until: before, UTC epoch seconds.
        status: the job's status (``pending``, ``completed``, ``failed``), or ``charged`` for
            a charge without a job (images, text).
    """

    user_id: int | None = None
    model: str | None = None
    kind: str | None = None
    since: float | None = None
    until: float | None = None
    status: str | None = None


@dataclass(frozen=True, slots=True)
class LedgerLine:
    """One charge of the ledger with its job, when it has one.

    Attributes:
        id: the ledger row's id (the cursor of paging).
        at: when it was charged, UTC epoch seconds.
        user_id: the member who asked.
        kind: ``video``, ``image`` or ``text``.
        model: the model.
        job_id: the job's id (asynchronous results); None otherwise.
        task_id: the service's task id; None for text.
        cost_micro: the charge, micro-cents.
        status: the job's status, or ``charged`` without a job.
        prompt: the job's prompt summary; empty without a job, or when hidden.
        private: the prompt is hidden: the member keeps their results private and the viewer
            is neither them nor an admin.
    """

    id: int
    at: float
    user_id: int
    kind: str
    model: str
    job_id: int | None
    task_id: str | None
    cost_micro: int
    status: str
    prompt: str
    private: bool = False


@dataclass(frozen=True, slots=True)
class SpendBucket:
    """Charges grouped by one key (a day, a model, a kind, a tier, a member).

    Attributes:
        key: the group: a UTC day's epoch second, a model, a kind, a tier's role id (None: no
            tier) or a member id.
        count: how many charges.
        micro: their sum, micro-cents.
    """

    key: str | int | None
    count: int
    micro: int


@dataclass(frozen=True, slots=True)
class ResultItem:
    """A finished result, for the gallery and My results.

    Attributes:
        job_id: the job.
        guild_id: where it was asked (negative: a member's own wallet, no server).
        channel_id: the channel of its card.
        message_id: the card's message; None when none was posted.
        user_id: who asked.
        kind: ``video`` or ``image``.
        model: the model.
        prompt: its prompt summary.
        outputs: the service's result URLs.
        cost_micro: what it cost, micro-cents.
        created_at: UTC epoch seconds.
    """

    job_id: int
    guild_id: int
    channel_id: int
    message_id: int | None
    user_id: int
    kind: str
    model: str
    prompt: str
    outputs: tuple[str, ...]
    cost_micro: int
    created_at: float


@dataclass(frozen=True, slots=True)
class Thumbnail:
    """The thumbnail of one result file (``thumbnails``): a small WebP picture.

    Attributes:
        job_id: the job.
        index: the file's place among the job's outputs (0 first).
        digest: hex, the first 32 characters of the picture's SHA-256 (its ETag).
        mime: ``image/webp``.
        width: pixels.
        height: pixels.
        duration: a clip's duration, seconds; None for an image.
        made_at: UTC epoch seconds.
        data: the picture's bytes; empty where only its description was read (a gallery).
    """

    job_id: int
    index: int
    digest: str
    mime: str
    width: int
    height: int
    duration: float | None
    made_at: float
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class ShowcaseEntry:
    """A result its member shared to their server's showcase.

    Attributes:
        id: the entry.
        guild_id: the server.
        user_id: who shared it (always the member who asked for it).
        shared_at: UTC epoch seconds.
        votes: members who voted for it (one vote each).
        result: the result itself.
        removed_at: when an admin removed it; None while it is shown.
        post: ``(channel id, message id)`` of its showcase channel's post; None without one.
    """

    id: int
    guild_id: int
    user_id: int
    shared_at: float
    votes: int
    result: ResultItem
    removed_at: float | None = None
    post: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class JobCounts:
    """A server's jobs now and recently, for the Overview.

    Attributes:
        today: jobs created since the UTC day began.
        pending: jobs the service is still working on.
        failed_last_day: jobs that failed in the last 24 hours.
        in_flight: requests holding budget right now (reservations not yet settled).
        failures: the last day's failures, newest first, at most ten ``(job id, model, error)``.
    """

    today: int
    pending: int
    failed_last_day: int
    in_flight: int
    failures: tuple[tuple[int, str, str], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class MemberAccess:
    """A member of a server the bot is in, as the bot reads them (REST, with the bot token).

    Attributes:
        guild_name: the server's name.
        permissions: the member's server-wide permission bits (roles and @everyone; all of
            them for the owner), Discord's "Permissions" computation without channels.
        role_ids: the member's roles.
    """

    guild_name: str
    permissions: int
    role_ids: frozenset[int]


@dataclass(frozen=True, slots=True)
class MemberProfile:
    """How a member of a server looks there: their name and their avatar.

    Attributes:
        name: the server nickname, else the global display name, else the username.
        avatar_url: their avatar on Discord's CDN (the server's own avatar first, else the
            account's, else Discord's default avatar); an absolute ``https://`` URL.
    """

    name: str
    avatar_url: str


class MessageUnreachable(Exception):
    """Discord will not show the bot a message: 403 (no access) or 404 (gone).

    Attributes:
        whole_channel: the refusal is the channel's (Missing Access, Unknown Channel), so
            every message of the channel is out of reach; False: this message only (Unknown
            Message).
    """

    def __init__(self, whole_channel: bool) -> None:
        super().__init__("channel unreachable" if whole_channel else "message unreachable")
        self.whole_channel = whole_channel
