"""The repositories, written once for both engines over :class:`bot.storage.sql.Sql`.

One module per concern: its repository class (SQLAlchemy Core statements over
:mod:`bot.storage.schema`) and the mapping of its rows into the :mod:`bot.domain` types; what
the engines spell differently is in :mod:`.dialect`. There is no interface beside them: each
has one implementation, and the tests run it on real databases of both engines.
"""
