"""Lock bookkeeping of logical units that create or delete instance locks.
"""


from ganeti import locking


def lock_owner(glm, level, name):
    """The owner holding lock ``name`` at ``level`` exclusively, or None.

    Logical units are not told their lock owner; an LU that holds a lock
    exclusively is its only owner, which is how it finds itself (to delete
    an instance lock it holds, for instance).
    """
    lockset = glm.lockset(level)
    full = "%s/%s" % (lockset.name, name)
    for info in lockset.get_info():
        if info["name"] == full and info["mode"] == locking.MODE_EXCLUSIVE \
                and len(info["owners"]) == 1:
            return info["owners"][0]
    return None


async def remove_instance_lock(lu, instance_uuid):
    """Delete the lock of an instance the LU holds exclusively."""
    glm = lu.ctx.glm
    owner = lock_owner(glm, locking.LEVEL_INSTANCE, instance_uuid)
    if owner is None:
        if instance_uuid in glm.lockset(locking.LEVEL_INSTANCE).list_names():
            lu.log_warning("Lock of instance %s is not held exclusively; it"
                           " is left in place", instance_uuid)
        return
    await glm.remove(locking.LEVEL_INSTANCE, [instance_uuid], owner)
