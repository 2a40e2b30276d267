"""The health endpoints' set-up as an operator meets it: a busy port is one clear line."""

import socket
from pathlib import Path

from tests.test_first_run import one_line, run_bot


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
