"""The bot's Prometheus metrics: one :class:`Metrics` per process, injected where it is counted.

Each :class:`Metrics` owns its :class:`prometheus_client.CollectorRegistry` (never the global
default), so two bots, or two tests, in one interpreter never share a counter. In a deployment
of several processes (gateways and ``python -m bot worker``) each process serves its own
registry on its own ``/metrics``, told apart by the scrape's ``instance`` label and
``genbot_process_info{role}`` (docs/operations.md, "Several processes"). The services
take it as an optional argument and count through its small methods; ``docs/operations.md``
lists every metric and its meaning.

Labels are bounded and never secret: operations, outcomes, priorities, job kinds and states,
delivery routes, Discord error codes, command names, shard ids. No key, token, prompt, user or
server id is ever a label.
"""

from __future__ import annotations

from decimal import Decimal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The ``Content-Type`` of :meth:`Metrics.render` (Prometheus text format 0.0.4)."""

_FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_ACK = (0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0)
"""Discord wants an interaction acknowledged within 3 s (Interactions docs, "Responding")."""
_SLOW = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


ROLES = ("bot", "gateway", "worker")
"""What a process does, the ``role`` of ``genbot_process_info``: ``bot`` takes commands and
polls (``python -m bot``), ``gateway`` only takes commands (``POLLER_ENABLED=false``),
``worker`` only polls and delivers (``python -m bot worker``)."""


class Metrics:
    """Every metric of the bot, registered in a registry of its own.

    Args:
        role: what the process does (:data:`ROLES`), exported as ``genbot_process_info``.

    Attributes:
        registry: where the metrics live; :meth:`render` serialises it.

    Raises:
        ValueError: ``role`` is not one of :data:`ROLES`.
    """

    def __init__(self, role: str = "bot") -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        # The library's process_*, python_gc_* and python_info metrics, in our registry.
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        PlatformCollector(registry=r)
        self.process_info = Gauge(
            "genbot_process_info",
            "Always 1; role: bot (commands and polls), gateway (commands only) or worker "
            "(polls and deliveries only).",
            ["role"],
            registry=r,
        )
        self.process_info.labels(role).set(1)
        self.upstream_requests = Counter(
            "genbot_upstream_requests",
            "Generation API requests sent, by operation and outcome.",
            ["operation", "outcome"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "genbot_upstream_request_seconds",
            "Time from sending a Generation API request to its answer, seconds.",
            ["operation"],
            buckets=_FAST,
            registry=r,
        )
        self.upstream_429 = Counter(
            "genbot_upstream_rate_limited",
            "429 answers received from the Generation API, by operation.",
            ["operation"],
            registry=r,
        )
        self.limiter_wait = Histogram(
            "genbot_limiter_wait_seconds",
            "Time a request queued in the per-key limiter before being sent, seconds.",
            ["priority"],
            buckets=(0.0, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
            registry=r,
        )
        self.limiter_refusals = Counter(
            "genbot_limiter_refusals",
            "Requests refused by the limiter because the wait would be too long.",
            ["priority"],
            registry=r,
        )
        self.jobs = Gauge(
            "genbot_jobs",
            "Open jobs by state (pending, undelivered) and kind, read from the database at "
            "each scrape.",
            ["state", "kind"],
            registry=r,
        )
        self.jobs_finished = Counter(
            "genbot_jobs_finished",
            "Jobs the poller saw finish, by status (completed, failed) and kind.",
            ["status", "kind"],
            registry=r,
        )
        self.poll_lag = Histogram(
            "genbot_poll_lag_seconds",
            "How late a job's poll started: now minus when the job was due, seconds.",
            buckets=(0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
            registry=r,
        )
        self.detection_delay = Histogram(
            "genbot_detection_delay_seconds",
            "Time from the poller seeing a task finished to its result shown, seconds.",
            ["kind"],
            buckets=_FAST,
            registry=r,
        )
        self.deliveries = Counter(
            "genbot_deliveries",
            "Results shown, by delivery route.",
            ["route"],
            registry=r,
        )
        self.delivery_failures = Counter(
            "genbot_delivery_failures",
            "Failed delivery attempts, by route and Discord error code (or network, 429).",
            ["route", "code"],
            registry=r,
        )
        self.leases_lost = Counter(
            "genbot_leases_lost",
            "Writes refused because this process's lease on the job had run out and another "
            "process had claimed it (fencing token), by what was leased (poll, delivery).",
            ["what"],
            registry=r,
        )
        for what in ("poll", "delivery"):
            self.leases_lost.labels(what)
        self.ack_seconds = Histogram(
            "genbot_interaction_ack_seconds",
            "Time from an interaction's creation (its snowflake) to its acknowledgement.",
            ["command"],
            buckets=_ACK,
            registry=r,
        )
        self.credits_reserved = Counter(
            "genbot_credits_reserved_cents",
            "Cents held by budget reservations, by kind.",
            ["kind"],
            registry=r,
        )
        self.credits_charged = Counter(
            "genbot_credits_charged_cents",
            "Cents the Generation API reported charged (ledger), by kind.",
            ["kind"],
            registry=r,
        )
        self.credits_released = Counter(
            "genbot_credits_released_cents",
            "Cents of reservations given back because the call charged nothing, by kind.",
            ["kind"],
            registry=r,
        )
        self.commands = Counter(
            "genbot_commands",
            "Application commands handled, by name and outcome (ok, refused, error, restarting).",
            ["command", "outcome"],
            registry=r,
        )
        self.gateway_latency = Gauge(
            "genbot_gateway_latency_seconds",
            "Gateway heartbeat latency per shard, seconds (read at each scrape).",
            ["shard"],
            registry=r,
        )
        self.poller_last_pass = Gauge(
            "genbot_poller_last_pass_timestamp_seconds",
            "When the poller last finished a pass, UTC epoch seconds.",
            registry=r,
        )
        self.ready = Gauge(
            "genbot_ready", "1 when /readyz answers 200, else 0 (read at each scrape).", registry=r
        )
        self.retention_swept = Counter(
            "genbot_retention_swept_rows",
            "Rows the retention sweep deleted, by table.",
            ["table"],
            registry=r,
        )
        self.safety_scores = Counter(
            "genbot_safety_scores",
            "Safety verdicts asked for, by outcome (scored, cached, failed: held for review).",
            ["outcome"],
            registry=r,
        )
        self.safety_seconds = Histogram(
            "genbot_safety_score_seconds",
            "Time from asking for a safety score to the model's verdict, seconds.",
            buckets=_FAST,
            registry=r,
        )
        self.retention_last_sweep = Gauge(
            "genbot_retention_last_sweep_timestamp_seconds",
            "When the retention sweep last finished, UTC epoch seconds.",
            registry=r,
        )

    def render(self) -> bytes:
        """The registry in the Prometheus text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)

    def upstream(self, operation: str, outcome: str, seconds: float | None) -> None:
        """Count one Generation API request; ``seconds`` None when no answer came."""
        self.upstream_requests.labels(operation, outcome).inc()
        if seconds is not None:
            self.upstream_seconds.labels(operation).observe(max(0.0, seconds))
        if outcome == "rate_limited":
            self.upstream_429.labels(operation).inc()

    def swept(self, swept: dict[str, int], at: float) -> None:
        """Count one retention sweep that finished at ``at`` (UTC epoch seconds).

        Args:
            swept: rows deleted per table; every table swept is listed, 0 when nothing was
                due, so that each series exists from the first sweep.
            at: when the sweep finished.
        """
        for table, rows in swept.items():
            self.retention_swept.labels(table).inc(rows)
        self.retention_last_sweep.set(at)

    def safety(self, outcome: str, seconds: float | None) -> None:
        """Count one safety verdict (``scored``, ``cached``, ``failed``); ``seconds``: scored."""
        self.safety_scores.labels(outcome).inc()
        if seconds is not None:
            self.safety_seconds.observe(max(0.0, seconds))

    def credits(self, what: str, kind: str, cents: Decimal | int) -> None:
        """Add ``cents`` to the ``what`` (reserved, charged, released) counter of ``kind``.

        Prometheus counters are floats: fine for a rate or a dashboard; the ledger stays the
        exact record.
        """
        counter = {
            "reserved": self.credits_reserved,
            "charged": self.credits_charged,
            "released": self.credits_released,
        }[what]
        if cents > 0:
            counter.labels(kind).inc(float(cents))
