"""An admin's key set through ``/config api-key set``'s form, as Discord delivers it."""

from tests.support.e2e.harness import ADMIN_PERMISSIONS, World


async def set_key(world: World, key: str, *, user_id: int | None = None) -> str:
    """Run ``/config api-key set`` as the admin, submit ``key`` in the modal; return the answer.

    ``user_id``: another member with the admin's permissions types it instead (each member's
    key checks are 30 s apart, whichever server or surface: a second key set within a
    scenario comes from a second admin).
    """
    handle = await world.command(
        "config",
        {},
        admin=True,
        group="api-key",
        subcommand="set",
        user_id=user_id if user_id is not None else world.admin.id,
    )
    await handle.wait_callback()
    assert handle.modal is not None
    custom_id = handle.modal["custom_id"]
    field_id = handle.modal["components"][0]["components"][0]["custom_id"]
    submitted = await world.discord.submit_modal(
        custom_id, {field_id: key}, permissions=ADMIN_PERMISSIONS
    )
    answer = await submitted.wait_original(timeout=15)
    return answer.content
