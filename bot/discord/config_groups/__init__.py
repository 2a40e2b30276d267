"""``/config``'s nested groups, one module each (``cogs/config.py`` attaches them).

Each group is an ``app_commands.Group`` subclass of :class:`~bot.discord.config_groups.common.
ConfigGroup`: it needs Manage Server as ``/config`` does, reaches the services through the
interaction's client, and names the admin (:func:`~bot.discord.config_groups.common.actor`) in
every change :class:`~bot.services.guild_config.GuildConfigService` audits.
"""
