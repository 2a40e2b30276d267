"""The failures of the store that every layer may meet, whatever the engine.

Engines translate their drivers' errors into these; the driver's error is the ``__cause__``.
Anything else a driver raises (a busy or lost connection) propagates as it is; see
:mod:`bot.jobs.supervisor` for the ones treated as transient.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of the storage errors that do not depend on the engine."""


class ConstraintError(StorageError):
    """A write broke a constraint of the schema (e.g. a negative amount, a cap below 1).

    Only the conflicts a method documents as expected ("task already recorded") are not errors.
    The transaction the write ran in is rolled back when the error leaves its block.
    """


class StorageUnavailableError(StorageError):
    """The database did not answer (closed, unreachable, or refusing connections).

    Raised by ``Database.ping`` (:mod:`bot.storage.database`); the driver's error is the
    ``__cause__`` (its text never contains a password: engines build it from the error, not
    from the connection string).
    """


class SchemaTooNewError(StorageError, RuntimeError):
    """The database was written by a newer version of the bot; start-up must stop.

    Attributes:
        found: the database's schema version.
        supported: the newest version this code knows.
    """

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"The database has schema version {found}, but this version of the bot only knows "
            f"versions up to {supported}: it was last used by a newer release. Run that release "
            "(or restore a backup taken before the upgrade); refusing to start so that the "
            "data is not damaged."
        )
        self.found = found
        self.supported = supported
