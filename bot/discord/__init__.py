"""The Discord adapter: the bot, its command tree, request flows, delivery to Discord, rendering.

Only this package and ``cogs/`` import ``discord``. It calls the services and is handed to the
job runner (:mod:`bot.jobs`) as the port the poller delivers through; nothing below imports it.
"""
