"""What ``pyproject.toml`` promises: every package imported is declared, nothing idle, a license."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OWN = {"bot", "cogs", "tests", "bench", "tools"}
NOT_IMPORTED: set[str] = set()
"""Declared but not imported by us (a comment in pyproject.toml must say why)."""
OPTIONAL = {"zstandard", "nudenet"}
"""Imported inside ``try``: the Discord emulator works without zstandard; nudenet is the
optional extra ``[nudenet]`` (AGPL-3.0, never a default dependency: bot/media/safety.py)."""


def top_level_imports(*folders: str) -> set[str]:
    names = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - OWN - set(sys.stdlib_module_names) - OPTIONAL


def distributions(modules: set[str]) -> set[str]:
    found = packages_distributions()
    return {canonical(found[module][0]) for module in modules}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> set[str]:
    return {canonical(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]) for line in requirements}


def test_every_package_the_bot_imports_is_a_dependency() -> None:
    assert distributions(top_level_imports("bot", "cogs")) <= declared(PROJECT["dependencies"])


def test_every_package_the_tests_import_is_declared() -> None:
    everything = declared(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"])
    assert distributions(top_level_imports("tests", "bench")) <= everything


def test_no_declared_package_goes_unused() -> None:
    used = distributions(top_level_imports("bot", "cogs", "tests", "bench"))
    # mypy and ruff are tools run from the command line, not imported; stubs are read by mypy;
    # pytest-xdist is a pytest plugin (.ci/run's -n).
    tools = {"mypy", "ruff", "asyncpg-stubs", "types-regex", "pytest-xdist"} | NOT_IMPORTED
    idle = declared(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"]) - used
    assert idle <= tools


def test_the_project_is_mit_licensed() -> None:
    assert PROJECT["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 genbot contributors" in text
    assert "3.11" in PROJECT["requires-python"]
    assert "Python ≥ 3.11" in (ROOT / "README.md").read_text()


def pins(lock: Path) -> dict[str, str]:
    """The ``name==version`` lines of a lock file written by ``uv pip compile``."""
    found = re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", lock.read_text(), re.M)
    return {canonical(name): version for name, version in found}


@pytest.mark.parametrize(
    ("lock", "groups"),
    [("requirements.lock", ("dependencies",)), ("requirements-dev.lock", ("dependencies", "dev"))],
)
def test_the_lock_files_pin_every_requirement_within_its_range(
    lock: str, groups: tuple[str, ...]
) -> None:
    pinned = pins(ROOT / lock)
    wanted = list(PROJECT["dependencies"])
    if "dev" in groups:
        wanted += PROJECT["optional-dependencies"]["dev"]
    for line in wanted:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonical(requirement.name)
        assert name in pinned, f"{lock} does not pin {name}: regenerate it (its first lines)"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{lock} pins {name}=={pinned[name]} outside {requirement.specifier}"
        )


def test_ci_and_the_image_install_only_wheels() -> None:
    # No compiler and no system headers anywhere: every dependency has wheels (Linux x86_64 and
    # aarch64, macOS; Python 3.11 to 3.13), and CI proves the README's install resolves that way.
    ci = (ROOT / ".ci" / "run").read_text()
    installs = [
        line for line in ci.splitlines() if "pip install" in line and "--upgrade pip" not in line
    ]
    assert installs
    assert all("--only-binary :all:" in line for line in installs), installs
    assert any('-e ".[dev]"' in line for line in installs)
    assert any("-r requirements-dev.lock" in line for line in installs)
    assert "libicu" not in ci and "g++" not in ci
    image = (ROOT / "Dockerfile").read_text()
    assert "--only-binary :all: -r requirements.lock" in image
    assert "g++" not in image and "libicu" not in image
