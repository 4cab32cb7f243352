"""Power-cycling a real node: the hard reboot ``gnt-node powercycle``
asks for when the node is wedged (nothing is shut down cleanly, disks are
not even synced: they may be what hangs).

The node daemon calls :func:`powercycle_node` only after its answer went
out, and only on a node whose root is ``/``; a virtual cluster node
restarts its daemons instead (:mod:`ganeti.server.noded.powercycle`).
"""

import subprocess

from twisted.logger import Logger

from ganeti import constants

log = Logger()

#: writing ``b`` there reboots at once, without syncing or unmounting
SYSRQ_TRIGGER = "/proc/sysrq-trigger"
#: the fallback when the kernel has no magic SysRq
REBOOT_COMMAND = ("reboot", "-n", "-f")
#: seconds a hypervisor's own command may take
COMMAND_TIMEOUT = 30


def hypervisor_commands(hypervisor, hvparams):
    """What a hypervisor runs before the kernel reboots: Xen's own host
    reboot (debug key R), the others none."""
    if hypervisor in (constants.HT_XEN_PVM, constants.HT_XEN_HVM):
        xen_cmd = (hvparams or {}).get("xen_cmd") or "xl"
        return [[xen_cmd, "debug-keys", "R"]]
    return []


def linux_powercycle(run=subprocess.run, sysrq=SYSRQ_TRIGGER):
    """Reboot the machine now: the SysRq trigger, then ``reboot -n -f``
    if the machine is still there."""
    try:
        with open(sysrq, "w") as f:
            f.write("b")
    except OSError as err:
        log.warn("Cannot use {path} ({err}); running reboot -f",
                 path=sysrq, err=err)
    run(list(REBOOT_COMMAND), timeout=COMMAND_TIMEOUT)


def powercycle_node(hypervisor, hvparams, run=subprocess.run,
                    sysrq=SYSRQ_TRIGGER):
    """Hard reboot of this machine (blocking; the machine goes away)."""
    log.warn("Power-cycling this node (hypervisor {hv})", hv=hypervisor)
    for argv in hypervisor_commands(hypervisor, hvparams):
        try:
            run(argv, timeout=COMMAND_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as err:
            log.warn("{cmd} failed: {err}", cmd=" ".join(argv), err=err)
    linux_powercycle(run, sysrq)
