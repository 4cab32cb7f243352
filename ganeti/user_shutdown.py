"""When a guest's own poweroff counts as a user shutdown.

A guest that powers itself off leaves its domain behind in the hypervisor's
"shutdown" state.  Whether that is a user shutdown (the instance becomes
``USER_down`` and is not restarted) or a failure (``ERROR_down``, restarted
by the watcher) depends on two settings:

* the cluster's ``enabled_user_shutdown`` must be on;
* for KVM, the instance's (filled) hypervisor parameter ``user_shutdown``
  must be on too: only then does its qemu keep the domain with
  ``-no-shutdown`` so that a poweroff can be told from a crash.  The other
  hypervisors always tell them apart.

Queries, ``gnt-cluster verify``, instance information and
``OP_INSTANCE_SHUTDOWN`` with ``admin_state_source=user`` (what the watcher
submits) all decide with the functions below.
"""

from ganeti import constants
from ganeti import hypervisor
from ganeti import objects

__all__ = ["allowed", "is_user_down"]


def allowed(cluster, instance, hvparams=None):
    """Whether a poweroff of ``instance``'s guest may count as USER_down.

    ``hvparams`` are the instance's filled hypervisor parameters, when the
    caller has them already.
    """
    if not cluster.enabled_user_shutdown:
        return False
    hv_name = instance.hypervisor or cluster.default_hypervisor
    if hv_name != constants.HT_KVM:
        return True
    if hvparams is None:
        hvparams = objects.fill_hvparams(cluster, instance)
    return bool(hvparams.get(constants.HV_KVM_USER_SHUTDOWN))


def is_user_down(cluster, instance, info, hvparams=None):
    """Whether the node's answer ``info`` (``instance_info``: a dict with
    ``state``, or None) shows a user shutdown of ``instance``."""
    return (bool(info) and info.get("state") == hypervisor.SHUTDOWN
            and allowed(cluster, instance, hvparams))
