"""The bot's commands as Discord lists them: the one place the command list is written.

A new command adds its name here; the unit test of the tree (tests/discord/test_commands.py) and the
end-to-end tests of the registration (tests/e2e/) compare against it.
"""

SLASH_COMMANDS = frozenset(
    {
        "text",
        "image",
        "video",
        "video-advanced",
        "models",
        "config",
        "usage",
        "jobs",
        "settings",
        "chat",
    }
)
"""Slash commands (type 1)."""

MESSAGE_MENUS = frozenset({"Animate image", "Edit image"})
"""Message context menus (type 3)."""
