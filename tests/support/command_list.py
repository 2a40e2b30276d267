"""The bot's commands as Discord lists them: the one place the command list is written.

A new command adds its name (and its options) here; the unit test of the tree
(tests/discord/test_commands.py) and the end-to-end tests of the registration (tests/e2e/)
compare against it.
"""

SLASH_COMMANDS = frozenset(
    {
        "text",
        "image",
        "video",
        "video-advanced",
        "video-join",
        "models",
        "config",
        "usage",
        "jobs",
        "settings",
        "chat",
        "credits",
    }
)
"""Slash commands (type 1)."""

MESSAGE_MENUS = frozenset({"Animate image", "Edit image", "Continue video"})
"""Message context menus (type 3)."""

OPTIONS = {
    "text": ["prompt", "model", "system", "max_tokens", "temperature"],
    "image": [
        "prompt",
        "model",
        "aspect_ratio",
        "mode",
        "image_url",
        "image",
        "image_urls",
        "image2",
        "image3",
        "image4",
        "takes",
        "enhance",
        "style",
        "character",
        "draft",
    ],
    "video": [
        "prompt",
        "model",
        "duration",
        "aspect_ratio",
        "image_url",
        "image",
        "generate_audio",
        "lock_camera",
        "camera",
        "takes",
        "enhance",
        "style",
        "character",
        "draft",
    ],
    "video-advanced": [],  # a form: a modal
    "video-join": ["videos"],
    "models": ["type"],
    "usage": ["user"],
    "jobs": ["member", "everyone", "show"],
}
"""The options of the commands that take them directly, in Discord's order."""

CONFIG = frozenset(
    {
        "admin-channel",
        "api-key",
        "billing",
        "blocked-terms",
        "budget",
        "channels",
        "confirm-above",
        "cooldown",
        "draft",
        "enhance",
        "guard",
        "language",
        "limits",
        "models",
        "persona",
        "safety",
        "sequence-length",
        "show",
        "showcase",
        "style",
        "tier",
    }
)
"""``/config``'s subcommands and subcommand groups."""

LANGUAGES = ("en-US", "es-ES", "pt-BR", "fr", "de", "ja", "default")
"""``/config language``'s choices, by value: the shipped locales, then the server's default."""

SUBCOMMAND_OPTIONS = {
    ("config", "admin-channel"): ["channel"],
    ("config", "showcase"): ["channel"],
    ("config", "enhance"): ["model", "image-system", "video-system", "reset"],
    ("config", "draft"): ["image-model", "video-model", "reset"],
    ("config", "safety"): [
        "mode",
        "review-above",
        "block-above",
        "review-channel",
        "reports-to-hide",
        "nsfw-channels",
    ],
}
"""The options of some subcommands, in Discord's order (``/config showcase channel:``)."""

NAMED_SUBCOMMANDS = {
    ("config", "style", "add"): (
        ["name", "suffix"],
        ["image1", "image2", "image3", "image4", "from-results"],
    ),
    ("config", "style", "remove"): (["name"], []),
    ("config", "style", "tiers"): (["name"], ["tier1", "tier2", "tier3"]),
    ("config", "style", "list"): ([], []),
    ("settings", "character", "add"): (["name", "image"], ["shared"]),
    ("settings", "character", "remove"): (["name"], []),
    ("settings", "character", "list"): ([], []),
}
"""Subcommands with required options: (the required ones, then the optional ones), in order."""
