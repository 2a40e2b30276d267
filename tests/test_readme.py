"""The README is a front door: short, its two commands, the setup steps, links that lead on."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

VENV = "python3 -m venv .venv && .venv/bin/pip install"
START = f"{VENV} -e . && DISCORD_TOKEN=your-bot-token .venv/bin/python -m bot"
TESTS = f'{VENV} -e ".[dev]" && .venv/bin/python -m pytest -n 6 --dist loadfile'


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match is not None, f"the README has no section {title!r}"
    return match.group(1)


def links(text: str) -> list[str]:
    """The relative targets of the Markdown links in ``text`` (anchors dropped).

    Code (fenced blocks, inline spans) holds no links: a page may show link syntax there.
    """
    prose = re.sub(r"`[^`]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    targets = re.findall(r"\]\(([^)\s]+)\)", prose)
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and t[0] != "#"]


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len(README.splitlines()) <= 120


def test_the_readme_starts_the_bot_and_runs_the_tests_in_one_command_each() -> None:
    assert f"```sh\n{START}\n```" in section("Start it")
    assert f"```sh\n{TESTS}\n```" in section("Run the tests")


def test_creating_the_discord_application_takes_at_most_ten_steps() -> None:
    steps = re.findall(r"^(\d+)\. ", section("Create the Discord application"), re.M)
    assert 1 <= len(steps) <= 10
    text = " ".join(section("Create the Discord application").split())
    for step in ("DISCORD_TOKEN", "Privileged Gateway Intents", "invite link", "DEV_GUILD_ID"):
        assert step in text
    assert "/config api-key set" in text
    assert "sandbox" in text


def test_what_members_and_admins_can_do_is_one_line_each_leading_to_docs() -> None:
    for title in ("What members can do", "What admins can do"):
        items = re.split(r"^- ", section(title), flags=re.M)[1:]
        assert items
        for item in items:
            assert "](docs/" in item, item


def test_every_link_of_the_readme_and_the_docs_leads_somewhere() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in links(page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}"
