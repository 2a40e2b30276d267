"""The health endpoints' set-up as an operator meets it: a busy port is one clear line."""

import socket
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from bot.ops.health import check_readiness, check_worker_readiness
from tests.support.command_line import one_line, run_bot

if TYPE_CHECKING:
    from bot.discord.bot import GenBot
    from bot.jobs.poller import Poller


def test_a_metrics_port_in_use_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_bot(
            tmp_path,
            DATABASE_PATH=str(tmp_path / "bot.db"),
            GENAPI_BASE_URL="http://127.0.0.1:9/api/v1",
            METRICS_PORT=str(port),
        )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]  # after the migration lines of a new database
    assert last.startswith(f"genbot: cannot start: METRICS_PORT: cannot listen on 127.0.0.1:{port}")
    assert "address already in use" in last


def test_a_metrics_port_out_of_range_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = run_bot(tmp_path, DATABASE_PATH=str(tmp_path / "bot.db"), METRICS_PORT="70000")
    assert result.returncode == 2
    assert one_line(result).startswith("genbot: cannot start: METRICS_PORT:")
    assert not (tmp_path / "bot.db").exists()


class _Gateway:
    """The state ``check_readiness`` reads of a bot: READY received, its poller's last pass."""

    closing = False

    def __init__(self, *, poller_enabled: bool) -> None:
        self.services = SimpleNamespace(settings=SimpleNamespace(poller_enabled=poller_enabled))
        self.poller = SimpleNamespace(last_pass_at=None)

    def is_closed(self) -> bool:
        return False

    def is_ready(self) -> bool:
        return True


async def _ping() -> None:
    return None


async def test_a_gateway_that_leaves_polling_to_workers_is_ready_without_a_poller() -> None:
    # docker-compose.postgres.yml's gateway (POLLER_ENABLED=false) must pass its health check.
    gateway = _Gateway(poller_enabled=False)
    readiness = await check_readiness(cast("GenBot", gateway), _ping, now=1000.0)
    assert readiness.ready, readiness.reasons


async def test_a_process_whose_poller_never_ran_is_not_ready() -> None:
    bot = _Gateway(poller_enabled=True)
    readiness = await check_readiness(cast("GenBot", bot), _ping, now=1000.0)
    assert not readiness.ready
    assert readiness.reasons == {"poller": "has not run yet"}


async def _no_database() -> None:
    raise ConnectionRefusedError


async def test_a_worker_is_ready_once_its_lease_loop_ran_and_the_database_answers() -> None:
    poller = SimpleNamespace(last_pass_at=None)
    worker = cast("Poller", poller)
    starting = await check_worker_readiness(worker, _ping, now=10.0, stopping=False)
    assert starting.reasons == {"poller": "has not run yet"}
    poller.last_pass_at = 9.0
    assert (await check_worker_readiness(worker, _ping, now=10.0, stopping=False)).ready
    stuck = await check_worker_readiness(worker, _ping, now=100.0, stopping=False)
    assert stuck.reasons == {"poller": "last ran 91 s ago"}


async def test_a_stopping_worker_or_one_without_its_database_is_not_ready() -> None:
    worker = cast("Poller", SimpleNamespace(last_pass_at=9.0))
    stopping = await check_worker_readiness(worker, _ping, now=10.0, stopping=True)
    assert stopping.reasons == {"worker": "shutting down"}
    cut_off = await check_worker_readiness(worker, _no_database, now=10.0, stopping=False)
    assert cut_off.reasons == {"database": "query failed: ConnectionRefusedError"}
