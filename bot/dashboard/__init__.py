"""The web dashboard: sign in with Discord, a server's spend, ledger, audit log and results.

Served by the bot's own process with ``aiohttp.web`` on its own port (``DASHBOARD_PORT``,
never the metrics port) when ``DASHBOARD_PUBLIC_URL`` and ``DISCORD_CLIENT_SECRET`` are set
(``docs/dashboard.md``). Like the Discord adapter it reaches storage only through services
(``bot.services.dashboard``, billing, member settings) and never imports ``discord``: what it
asks Discord with the bot's token goes through a :class:`bot.dashboard.rights.Directory`
(``bot.discord.dashboard_directory`` implements it).

Modules: ``app`` (the server, its headers and sessions), ``oauth`` (Discord's OAuth2 with
PKCE), ``rights`` (who may see which server, cached), ``pages`` (the pages), ``csv_export``
(the streamed CSV), ``charts`` (server-drawn SVG).
"""
