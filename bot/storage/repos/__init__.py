"""The repositories, written once for both engines over :class:`bot.storage.sql.Sql` (issue 19).

One module per area, each class implementing its Protocol of
:mod:`bot.storage.repositories` with SQLAlchemy Core statements over
:mod:`bot.storage.schema`; what the engines spell differently is in :mod:`.dialect`.
"""
