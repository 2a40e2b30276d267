"""The real ``python -m bot`` run as a subprocess, as an operator runs it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.token-secret-part"  # id 123456789012345678
UNREACHABLE_DISCORD = "http://127.0.0.1:9/api/v10"  # the discard port: refused at once


def run_bot(cwd: Path, *args: str, module: str = "bot", **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DISCORD_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=base | {"DISCORD_API_BASE_URL": UNREACHABLE_DISCORD} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]
