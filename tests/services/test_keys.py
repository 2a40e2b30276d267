"""Guild API keys: encrypted at rest, never stored in clear, and which key a request uses."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.config import SettingsError, load_settings
from bot.domain import JobStatus, Kind, NewJob
from bot.errors import KeyEncryptionUnavailable, NoApiKeyConfigured, user_message
from bot.services.keys import (
    KeyResolver,
    KeyUnavailable,
    KeyUnknown,
    KeyVault,
    ResolvedKey,
    StoredKeyUnreadable,
    fingerprint,
)
from bot.storage import Database
from bot.storage.database import Database as SqlDatabase

ROOT = Path(__file__).resolve().parents[2]
GUILD = 100
GUILD_KEY = "gk_live_9f8e7d6c5b4a39281706f5e4"
DEFAULT_KEY = "gk_live_default_0123456789abcdef"
OTHER_DEFAULT = "gk_live_default_after_the_leak_99"


@pytest.fixture
def secret() -> SecretStr:
    return SecretStr(Fernet.generate_key().decode())


def test_fingerprint_is_short_stable_and_distinct() -> None:
    fp = fingerprint(GUILD_KEY)
    assert fp == fingerprint(GUILD_KEY)
    assert len(fp) == 12
    assert all(c in "0123456789abcdef" for c in fp)
    assert fp != fingerprint(DEFAULT_KEY)
    assert GUILD_KEY[-8:] not in fp


def test_vault_round_trip(secret: SecretStr) -> None:
    vault = KeyVault(secret)
    ciphertext = vault.encrypt(GUILD_KEY)
    assert GUILD_KEY.encode() not in ciphertext
    assert vault.encrypt(GUILD_KEY) != ciphertext  # random IV: equal keys do not look equal
    assert vault.decrypt(ciphertext) == GUILD_KEY


def test_vault_without_a_secret_refuses() -> None:
    vault = KeyVault(None)
    assert not vault.available
    with pytest.raises(KeyEncryptionUnavailable):
        vault.encrypt(GUILD_KEY)
    with pytest.raises(KeyEncryptionUnavailable):
        vault.decrypt(b"anything")


def test_vault_with_another_secret_cannot_read(secret: SecretStr) -> None:
    ciphertext = KeyVault(secret).encrypt(GUILD_KEY)
    other = KeyVault(SecretStr(Fernet.generate_key().decode()))
    with pytest.raises(StoredKeyUnreadable) as info:
        other.decrypt(ciphertext)
    # Shown to users as "no key is set; an admin can set one", which is the remedy.
    assert isinstance(info.value, NoApiKeyConfigured)
    assert "/config api-key set" in user_message(info.value)


async def test_the_database_never_holds_the_plaintext_key(
    store: Database, secret: SecretStr, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    resolver = KeyResolver(store, KeyVault(secret), None)
    assert await resolver.store_key(GUILD, f"  {GUILD_KEY}\n") == GUILD_KEY[-4:]

    settings = await store.guilds.settings(GUILD)
    assert settings.api_key_last4 == GUILD_KEY[-4:]
    assert settings.api_key_ciphertext is not None
    assert GUILD_KEY.encode() not in settings.api_key_ciphertext
    # Nowhere in the files either: SQLite's main file and WAL, where the write is now;
    # PostgreSQL's whole data directory (its WAL included).
    if store.engine == "sqlite":
        files = [p for p in tmp_path.iterdir() if p.name.startswith("bot.db")]
        assert any(p.name.endswith("-wal") for p in files)
    else:
        files = [p for p in request.getfixturevalue("pg_server").data.rglob("*") if p.is_file()]
        assert any("pg_wal" in p.parts for p in files)
    for path in files:
        assert GUILD_KEY.encode() not in path.read_bytes(), path.name

    resolved = await resolver.resolve(GUILD)
    assert resolved.key.get_secret_value() == GUILD_KEY
    assert (resolved.source, resolved.fingerprint) == ("guild", fingerprint(GUILD_KEY))


async def test_without_key_encryption_key_nothing_is_stored(store: SqlDatabase) -> None:
    resolver = KeyResolver(store, KeyVault(None), SecretStr(DEFAULT_KEY))
    with pytest.raises(KeyEncryptionUnavailable) as info:
        await resolver.store_key(GUILD, GUILD_KEY)
    assert "Fernet.generate_key()" in user_message(info.value)
    assert (await store.guilds.settings(GUILD)).api_key_ciphertext is None
    assert (await resolver.resolve(GUILD)).source == "default"


async def test_an_empty_key_is_refused(store: SqlDatabase, secret: SecretStr) -> None:
    resolver = KeyResolver(store, KeyVault(secret), None)
    with pytest.raises(ValueError, match="empty"):
        await resolver.store_key(GUILD, "   ")
    assert (await store.guilds.settings(GUILD)).api_key_ciphertext is None


async def test_resolution_order_guild_then_default_then_error(
    store: SqlDatabase, secret: SecretStr
) -> None:
    with_default = KeyResolver(store, KeyVault(secret), SecretStr(DEFAULT_KEY))
    without_default = KeyResolver(store, KeyVault(secret), None)
    empty_default = KeyResolver(store, KeyVault(secret), SecretStr(""))

    default = await with_default.resolve(GUILD)
    assert (default.key.get_secret_value(), default.source) == (DEFAULT_KEY, "default")
    assert default.fingerprint == fingerprint(DEFAULT_KEY)
    for resolver in (without_default, empty_default):
        with pytest.raises(NoApiKeyConfigured):
            await resolver.resolve(GUILD)

    await with_default.store_key(GUILD, GUILD_KEY)
    assert (await with_default.resolve(GUILD)).source == "guild"
    assert (await without_default.resolve(GUILD)).source == "guild"
    assert (await with_default.resolve(GUILD + 1)).source == "default"  # other guilds unaffected

    await with_default.clear_key(GUILD)
    assert (await with_default.resolve(GUILD)).source == "default"


async def test_an_unreadable_guild_key_does_not_fall_back_to_the_default(
    store: SqlDatabase, secret: SecretStr
) -> None:
    await KeyResolver(store, KeyVault(secret), None).store_key(GUILD, GUILD_KEY)
    rotated = KeyVault(SecretStr(Fernet.generate_key().decode()))
    with pytest.raises(StoredKeyUnreadable):
        await KeyResolver(store, rotated, SecretStr(DEFAULT_KEY)).resolve(GUILD)
    with pytest.raises(KeyEncryptionUnavailable):
        await KeyResolver(store, KeyVault(None), SecretStr(DEFAULT_KEY)).resolve(GUILD)


def test_resolved_key_never_shows_the_key() -> None:
    resolved = ResolvedKey(SecretStr(GUILD_KEY), fingerprint(GUILD_KEY), "guild")
    for text in (repr(resolved), str(resolved), f"{resolved}"):
        assert GUILD_KEY not in text
        assert fingerprint(GUILD_KEY) in text


def test_several_encryption_keys_the_first_encrypts_all_decrypt() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    made_with_old = KeyVault(SecretStr(old)).encrypt(GUILD_KEY)
    both = KeyVault(SecretStr(f"{new}, {old}"))
    assert both.decrypt(made_with_old) == GUILD_KEY
    made_now = both.encrypt(GUILD_KEY)
    assert KeyVault(SecretStr(new)).decrypt(made_now) == GUILD_KEY  # the first one encrypts
    with pytest.raises(StoredKeyUnreadable):
        KeyVault(SecretStr(old)).decrypt(made_now)


def test_a_bad_entry_in_the_list_is_named_by_position_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = Fernet.generate_key().decode()
    monkeypatch.setenv("DISCORD_TOKEN", "tok")
    monkeypatch.setenv("KEY_ENCRYPTION_KEY", f"{good},not-a-fernet-secret")
    with pytest.raises(SettingsError) as bad:
        load_settings(_env_file=None)
    message = str(bad.value)
    assert "KEY_ENCRYPTION_KEY" in message
    assert "entry 2" in message
    assert "secret" not in message
    assert good not in message
    monkeypatch.setenv("KEY_ENCRYPTION_KEY", f"{good},{Fernet.generate_key().decode()}")
    assert load_settings(_env_file=None).key_encryption_key is not None


async def test_rotate_keys_reencrypts_current_and_retired_keys(tmp_path: Path) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    path = tmp_path / "bot.db"
    store = await SqlDatabase.open_sqlite(path, clock=ManualClock())
    resolver = KeyResolver(store, KeyVault(SecretStr(old)), None)
    await resolver.store_key(GUILD, "gk_live_retired_key_0123456789")
    await store.jobs.insert(
        NewJob(
            task_id="t1",
            provider="alpha",
            poll_url="/api/v1/video/t1",
            kind=Kind.VIDEO,
            model="m",
            guild_id=GUILD,
            channel_id=1,
            message_id=None,
            user_id=2,
            prompt_summary="p",
            details={},
            cost_cents=10,
            key_fingerprint=fingerprint("gk_live_retired_key_0123456789"),
            created_at=0.0,
            next_poll_at=0.0,
        )
    )
    await resolver.store_key(GUILD, GUILD_KEY)  # the first is retired: a job still uses it
    await resolver.store_key(GUILD + 1, DEFAULT_KEY)
    await KeyResolver(store, KeyVault(SecretStr(old)), SecretStr(OTHER_DEFAULT)).keep_default()
    await store.close()

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "DISCORD_TOKEN": "tok",
        "DATABASE_PATH": str(path),
        "KEY_ENCRYPTION_KEY": f"{new},{old}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "bot", "rotate-keys"],
        cwd=tmp_path,  # no .env
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "re-encrypted 4 stored API keys" in done.stdout
    assert old not in done.stdout + done.stderr

    store = await SqlDatabase.open_sqlite(path, clock=ManualClock())
    try:
        ciphertexts = [
            (await store.guilds.settings(GUILD)).api_key_ciphertext,
            (await store.guilds.settings(GUILD + 1)).api_key_ciphertext,
            *(r.ciphertext for r in await store.guilds.retired_keys(GUILD)),
            await store.guilds.default_key(fingerprint(OTHER_DEFAULT)),
        ]
        assert len(ciphertexts) == 4
        for ciphertext in ciphertexts:
            assert ciphertext is not None
            KeyVault(SecretStr(new)).decrypt(ciphertext)
            with pytest.raises(StoredKeyUnreadable):
                KeyVault(SecretStr(old)).decrypt(ciphertext)
        resolved = await KeyResolver(store, KeyVault(SecretStr(new)), None).resolve_fingerprint(
            GUILD, fingerprint("gk_live_retired_key_0123456789")
        )
        assert resolved is not None
    finally:
        await store.close()


async def test_rotate_keys_without_the_old_key_changes_nothing(store: SqlDatabase) -> None:
    old = SecretStr(Fernet.generate_key().decode())
    await KeyResolver(store, KeyVault(old), None).store_key(GUILD, GUILD_KEY)
    before = (await store.guilds.settings(GUILD)).api_key_ciphertext
    stranger = KeyResolver(store, KeyVault(SecretStr(Fernet.generate_key().decode())), None)
    with pytest.raises(StoredKeyUnreadable):
        await stranger.rotate()
    assert (await store.guilds.settings(GUILD)).api_key_ciphertext == before


async def test_an_unknown_key_is_retried_whether_or_not_the_default_key_is_set(
    store: SqlDatabase, secret: SecretStr
) -> None:
    with_default = KeyResolver(store, KeyVault(secret), SecretStr(DEFAULT_KEY))
    # Known nowhere is still "later", never "fail": the owner may bring it back.
    with pytest.raises(KeyUnknown, match="known nowhere"):
        await with_default.resolve_fingerprint(GUILD, "0123456789ab")
    without = KeyResolver(store, KeyVault(secret), None)
    with pytest.raises(KeyUnavailable):
        await without.resolve_fingerprint(GUILD, "0123456789ab")
    found = await with_default.resolve_fingerprint(GUILD, fingerprint(DEFAULT_KEY))
    assert found is not None and found.source == "default"


async def test_a_key_retired_while_unreadable_is_kept_then_found(
    store: SqlDatabase, secret: SecretStr
) -> None:
    await KeyResolver(store, KeyVault(secret), None).store_key(GUILD, GUILD_KEY)
    # Removed by an admin while KEY_ENCRYPTION_KEY was missing: its jobs cannot be counted.
    change = await KeyResolver(store, KeyVault(None), None).clear_key(GUILD)
    assert change.had_key and change.jobs_on_old_key is None
    (kept,) = await store.guilds.retired_keys(GUILD)
    assert kept.fingerprint is None
    # Back with the setting: the key is found, and deleted as no pending job uses it.
    found = await KeyResolver(store, KeyVault(secret), None).resolve_fingerprint(
        GUILD, fingerprint(GUILD_KEY)
    )
    assert found is not None and found.key.get_secret_value() == GUILD_KEY
    assert await store.guilds.retired_keys(GUILD) == []


async def test_a_key_found_once_is_polled_with_no_read_and_no_decryption(
    store: Database, secret: SecretStr
) -> None:
    await KeyResolver(store, KeyVault(secret), None).store_key(GUILD, GUILD_KEY)
    decrypted: list[str] = []
    resolver = KeyResolver(store, KeyVault(secret, on_key=decrypted.append), None)
    first = await resolver.resolve_fingerprint(GUILD, fingerprint(GUILD_KEY))
    assert first is not None and first.key.get_secret_value() == GUILD_KEY
    assert decrypted == [GUILD_KEY]

    # Gone from the database (removed, no pending job kept it): only memory can answer now.
    await KeyResolver(store, KeyVault(secret), None).clear_key(GUILD)
    assert await store.guilds.retired_keys(GUILD) == []
    assert await resolver.resolve_fingerprint(GUILD, fingerprint(GUILD_KEY)) == first
    assert decrypted == [GUILD_KEY]  # not decrypted again
    assert GUILD_KEY not in repr(resolver)
    assert GUILD_KEY not in repr(first)

    # What is not remembered is looked up as before: unknown keys still wait or fail.
    with pytest.raises(KeyUnavailable):
        await resolver.resolve_fingerprint(GUILD, "0123456789ab")
    with pytest.raises(KeyUnavailable):  # another guild's job is not served this guild's key
        await resolver.resolve_fingerprint(GUILD + 1, fingerprint(GUILD_KEY))
    with_default = KeyResolver(store, KeyVault(secret), SecretStr(DEFAULT_KEY))
    with pytest.raises(KeyUnknown):
        await with_default.resolve_fingerprint(GUILD, fingerprint(GUILD_KEY))


async def test_the_decrypted_keys_kept_are_bounded(store: Database, secret: SecretStr) -> None:
    other = "gk_live_other_guild_key_42424242"
    setter = KeyResolver(store, KeyVault(secret), None)
    await setter.store_key(GUILD, GUILD_KEY)
    await setter.store_key(GUILD + 1, other)
    resolver = KeyResolver(store, KeyVault(secret), SecretStr(DEFAULT_KEY), cache_size=1)
    assert await resolver.resolve_fingerprint(GUILD, fingerprint(GUILD_KEY)) is not None
    assert await resolver.resolve_fingerprint(GUILD + 1, fingerprint(other)) is not None
    await setter.clear_key(GUILD)
    await setter.clear_key(GUILD + 1)
    # Only the most recent one is still held; the other must be read again, and is gone.
    assert await resolver.resolve_fingerprint(GUILD + 1, fingerprint(other)) is not None
    with pytest.raises(KeyUnknown):
        await resolver.resolve_fingerprint(GUILD, fingerprint(GUILD_KEY))


def pending_job(task_id: str, key: str, guild_id: int = GUILD) -> NewJob:
    return NewJob(
        task_id=task_id,
        provider="alpha",
        poll_url=f"/api/v1/video/{task_id}",
        kind=Kind.VIDEO,
        model="m",
        guild_id=guild_id,
        channel_id=1,
        message_id=None,
        user_id=2,
        prompt_summary="p",
        details={},
        cost_cents=10,
        key_fingerprint=fingerprint(key),
        created_at=0.0,
        next_poll_at=0.0,
    )


async def reserve_on(store: Database, key: str | None, guild_id: int = GUILD) -> int:
    """A request in flight on ``key`` (None: a reservation of an older schema, key unknown)."""
    reservation = await store.ledger.add_reservation(
        guild_id=guild_id,
        user_id=2,
        kind=Kind.VIDEO,
        model="m",
        amount_cents=Decimal(10),
        created_at=0.0,
        expires_at=600.0,
        key_fingerprint=None if key is None else fingerprint(key),
    )
    assert reservation.key_fingerprint == (None if key is None else fingerprint(key))
    return reservation.id


async def test_a_key_replaced_while_a_request_is_in_flight_stays_until_the_request_ends(
    store: Database, secret: SecretStr
) -> None:
    """The POST's job is stored a moment after the replacement; its key must stay."""
    keys = KeyResolver(store, KeyVault(secret), None)
    await keys.store_key(GUILD, GUILD_KEY)
    refused = await reserve_on(store, GUILD_KEY)
    submitted = await reserve_on(store, GUILD_KEY)
    await reserve_on(store, DEFAULT_KEY)  # another key's request keeps nothing of this one

    change = await keys.store_key(GUILD, "gk_live_the_new_key_000000000000")
    assert change == "0000"
    (kept,) = await store.guilds.retired_keys(GUILD)
    assert kept.fingerprint == fingerprint(GUILD_KEY)

    # One request is refused (nothing charged, no job): the other still holds the key.
    await store.ledger.delete_reservation(refused)
    await keys.sweep_retired()
    assert [r.fingerprint for r in await store.guilds.retired_keys(GUILD)] == [kept.fingerprint]
    # The other is settled: its reservation becomes a pending job, in one transaction.
    async with store.transaction() as tx:
        await tx.guilds.lock(GUILD)
        await tx.ledger.delete_reservation(submitted)
        job = await tx.jobs.insert(pending_job("t-e1", GUILD_KEY))
    await keys.sweep_retired()
    found = await keys.resolve_fingerprint(GUILD, fingerprint(GUILD_KEY))
    assert found.key.get_secret_value() == GUILD_KEY
    # Its job ends: nothing live uses the key, which is deleted.
    assert await store.jobs.finish(job.id, JobStatus.COMPLETED, ["u"], None, 10.0)
    assert await store.guilds.retired_keys(GUILD) == []


async def test_a_job_ending_keeps_its_key_while_a_request_on_it_is_in_flight(
    store: Database, secret: SecretStr
) -> None:
    keys = KeyResolver(store, KeyVault(secret), None)
    await keys.store_key(GUILD, GUILD_KEY)
    job = await store.jobs.insert(pending_job("t-first", GUILD_KEY))
    in_flight = await reserve_on(store, GUILD_KEY)
    await keys.clear_key(GUILD)
    assert await store.jobs.finish(job.id, JobStatus.COMPLETED, ["u"], None, 10.0)
    assert [r.fingerprint for r in await store.guilds.retired_keys(GUILD)] == [
        fingerprint(GUILD_KEY)
    ]
    await store.ledger.delete_reservation(in_flight)
    assert await keys.sweep_retired() == 1
    assert await store.guilds.retired_keys(GUILD) == []


async def test_a_reservation_of_an_older_schema_keeps_every_key_of_its_guild(
    store: Database, secret: SecretStr
) -> None:
    keys = KeyResolver(store, KeyVault(secret), None)
    await keys.store_key(GUILD, GUILD_KEY)
    unknown = await reserve_on(store, None)
    await keys.clear_key(GUILD)
    assert len(await store.guilds.retired_keys(GUILD)) == 1
    await store.ledger.delete_reservation(unknown)
    assert await keys.sweep_retired() == 1


async def test_the_previous_default_key_is_kept_encrypted_until_its_last_job_ends(
    store: Database, secret: SecretStr
) -> None:
    """A change of GENAPI_API_KEY must not orphan the old key's jobs."""
    first = KeyResolver(store, KeyVault(secret), SecretStr(DEFAULT_KEY))
    assert await first.keep_default() == []
    job = await store.jobs.insert(pending_job("t-default", DEFAULT_KEY, guild_id=GUILD + 7))
    in_flight = await reserve_on(store, DEFAULT_KEY, guild_id=GUILD + 8)

    # Restarted with a new GENAPI_API_KEY (after a leak).
    second = KeyResolver(store, KeyVault(secret), SecretStr(OTHER_DEFAULT))
    assert await second.keep_default() == [fingerprint(DEFAULT_KEY)]
    ciphertext = await store.guilds.default_key(fingerprint(DEFAULT_KEY))
    assert ciphertext is not None and DEFAULT_KEY.encode() not in ciphertext
    found = await second.resolve_fingerprint(GUILD + 7, fingerprint(DEFAULT_KEY))
    assert (found.key.get_secret_value(), found.source) == (DEFAULT_KEY, "default")
    assert DEFAULT_KEY not in repr(found)

    # Its job ends, but a request on it is still in flight: kept; then that ends too.
    assert await store.jobs.finish(job.id, JobStatus.COMPLETED, ["u"], None, 10.0)
    assert await store.guilds.default_key(fingerprint(DEFAULT_KEY)) is not None
    await store.ledger.delete_reservation(in_flight)
    assert await second.sweep_retired() == 1
    assert await store.guilds.default_key(fingerprint(DEFAULT_KEY)) is None
    # The current one stays stored; started again with it, nothing else is kept.
    assert await store.guilds.default_key(fingerprint(OTHER_DEFAULT)) is not None
    assert await second.keep_default() == []


async def test_without_key_encryption_key_no_default_key_is_stored(store: Database) -> None:
    resolver = KeyResolver(store, KeyVault(None), SecretStr(DEFAULT_KEY))
    assert await resolver.keep_default() == []
    assert await store.guilds.default_key(fingerprint(DEFAULT_KEY)) is None
