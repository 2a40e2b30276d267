"""Discord extensions, one per command group; each module has ``setup(bot)``."""
