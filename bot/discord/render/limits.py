"""Discord's limits on what a message may hold, in one place.

Source: the Discord developer documentation, "Message" resource (content 2000 characters,
10 embeds), "Embed limits" (title 256, description 4096, 25 fields, field name 256, field
value 1024, footer 2048, author name 256, 6000 characters across all embeds of a message) and
"Message Components" (5 action rows of 5 buttons, button label 80, link-button URL 512).
"""

from __future__ import annotations

from typing import Final

CONTENT: Final = 2000
EMBEDS_PER_MESSAGE: Final = 10
EMBED_TITLE: Final = 256
EMBED_DESCRIPTION: Final = 4096
EMBED_FIELDS: Final = 25
FIELD_NAME: Final = 256
FIELD_VALUE: Final = 1024
EMBED_FOOTER: Final = 2048
EMBED_AUTHOR: Final = 256
EMBED_TOTAL: Final = 6000
ACTION_ROWS: Final = 5
BUTTONS_PER_ROW: Final = 5
BUTTONS: Final = ACTION_ROWS * BUTTONS_PER_ROW
BUTTON_LABEL: Final = 80
BUTTON_URL: Final = 512
FILES_PER_MESSAGE: Final = 10
