"""Jobs as the tests build them: new ones to insert, stored ones to show or schedule."""

from decimal import Decimal

from bot.domain import Job, JobStatus, Kind, NewJob


def make_job(*, created_at: float, model: str = "m", guild: int = 1, key: str = "fp") -> Job:
    """A pending video job as the database would return it, without one (for the schedule)."""
    new = NewJob(
        task_id="t",
        provider="alpha",
        poll_url="/api/v1/video/t?provider=alpha",
        kind=Kind.VIDEO,
        model=model,
        guild_id=guild,
        channel_id=7,
        message_id=None,
        user_id=3,
        prompt_summary="a cat",
        details={},
        cost_cents=50,
        key_fingerprint=key,
        created_at=created_at,
        next_poll_at=created_at,
    )
    fields = {name: getattr(new, name) for name in new.__dataclass_fields__}
    return Job(
        **fields,
        id=1,
        status=JobStatus.PENDING,
        finished_at=None,
        outputs=(),
        error=None,
        poll_count=0,
        announced_at=None,
        last_progress_at=None,
    )


def new_job(
    task_id: str,
    *,
    next_poll_at: float = 1_767_225_600.0,
    created_at: float = 1_767_225_600.0,
    model: str = "vid/t2v",
    user: int = 1,
    guild: int = 100,
    kind: Kind = Kind.VIDEO,
    cost: int = 50,
    key: str = "fp-default",
) -> NewJob:
    """A video job to insert (guild 100's by default), created and due at 2026-01-01 UTC."""
    return NewJob(
        task_id=task_id,
        provider="alpha",
        poll_url=f"/api/v1/video/{task_id}?provider=alpha",
        kind=kind,
        model=model,
        guild_id=guild,
        channel_id=7,
        message_id=None,
        user_id=user,
        prompt_summary="a cat on a skateboard",
        details={"duration": 5, "aspect_ratio": "16:9"},
        cost_cents=cost,
        key_fingerprint=key,
        created_at=created_at,
        next_poll_at=next_poll_at,
    )


SAMPLE_JOB = Job(
    task_id="t1",
    provider="p",
    poll_url="/v1/tasks/t1",
    kind=Kind.VIDEO,
    model="m",
    guild_id=1,
    channel_id=2,
    message_id=3,
    user_id=4,
    prompt_summary="a fox",
    details={},
    cost_cents=Decimal(1),
    key_fingerprint="f",
    created_at=0.0,
    next_poll_at=0.0,
    id=1,
    status=JobStatus.COMPLETED,
    finished_at=1.0,
    outputs=(),
    error=None,
    poll_count=1,
    announced_at=None,
    last_progress_at=None,
)
"""A finished video job of guild 1, for the Discord side of delivery."""


def exact_job(task_id: str, *, fingerprint: str = "fp") -> NewJob:
    """A video job of guild 1 costing 12.5 cents: a fraction the exact ledger must keep."""
    return NewJob(
        task_id=task_id,
        provider="p",
        poll_url=f"/tasks/{task_id}",
        kind=Kind.VIDEO,
        model="veo",
        guild_id=1,
        channel_id=10,
        message_id=None,
        user_id=100,
        prompt_summary="a cat",
        details={"seconds": 4},
        cost_cents=Decimal("12.5"),
        key_fingerprint=fingerprint,
        created_at=1000.0,
        next_poll_at=1010.0,
    )
