"""Instance consoles: how to reach the console of a running instance.

The description has Ganeti's console keys (``instance``, ``kind``,
``message``, ``host``, ``port``, ``user``, ``command``, ``display``):

* kvm with ``serial_console`` on: kind ``ssh``; ``command`` (run as
  ``user`` on ``host``, the primary node) joins the terminal to the
  instance's serial socket with socat;
* kvm with a ``vnc_bind_address`` (and no serial console): kind ``vnc``,
  ``port`` the instance's network port, ``display`` its VNC display;
* otherwise (fake instances, kvm with neither): kind ``msg``, a message.

The socket path is the node's ``<run>/kvm-hypervisor/ctrl/<name>.serial``
under the cluster's file layout, computed with the master's root (every
node of a real cluster has the same layout).

:class:`LUInstanceConsole` answers for a running instance only; the
``console`` query field gives the same description per instance.
"""

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.cmdlib import checks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.instance import PRIMARY_NODE, InstanceLU
from ganeti.hypervisor import state

__all__ = ["KINDS", "KIND_SSH", "KIND_VNC", "KIND_SPICE", "KIND_MESSAGE",
           "SOCAT_PATH", "CONSOLE_USER", "SOCAT_OPTIONS",
           "console_description", "serial_socket", "LUInstanceConsole"]

#: Ganeti's console kinds
KIND_SSH = "ssh"
KIND_VNC = "vnc"
KIND_SPICE = "spice"
KIND_MESSAGE = "msg"
KINDS = (KIND_SSH, KIND_VNC, KIND_SPICE, KIND_MESSAGE)
SOCAT_PATH = "/usr/bin/socat"
CONSOLE_USER = "root"
#: raw terminal, no local echo; Ctrl-] (0x1d) ends the session
SOCAT_OPTIONS = "raw,echo=0,escape=0x1d"
VNC_BASE_PORT = 5900


def serial_socket(root, instance_name):
    """Path of the kvm serial socket of ``instance_name`` on a node whose
    files are under ``root``."""
    return state.RuntimeDir(root, constants.HT_KVM).ctrl_path(
        instance_name, "serial")


def _description(instance, kind, **values):
    result = dict.fromkeys(("message", "host", "port", "user", "command",
                            "display"))
    result.update(values, instance=instance.name, kind=kind)
    return result


def console_description(cluster, instance, node, group, hvparams,
                        root="/"):
    """Ganeti's console description (a dict) of ``instance`` whose primary
    node is ``node`` (in ``group``), with filled ``hvparams``."""
    if instance.hypervisor == constants.HT_KVM:
        if hvparams.get("serial_console"):
            ndparams = objects.fill_ndparams(cluster, group, node)
            return _description(
                instance, KIND_SSH, host=node.name,
                port=ndparams.get(constants.ND_SSH_PORT),
                user=CONSOLE_USER,
                command=[SOCAT_PATH, "STDIO,%s" % SOCAT_OPTIONS,
                         "UNIX-CONNECT:%s"
                         % serial_socket(root, instance.name)])
        address = hvparams.get("vnc_bind_address")
        port = instance.network_port
        if address and isinstance(port, int) and port > VNC_BASE_PORT:
            return _description(instance, KIND_VNC, host=address, port=port,
                                display=port - VNC_BASE_PORT)
        return _description(instance, KIND_MESSAGE,
                            message="No serial shell for instance %s"
                            % instance.name)
    return _description(instance, KIND_MESSAGE,
                        message="Console not available for %s hypervisor"
                        % instance.hypervisor)


class LUInstanceConsole(InstanceLU):
    """The console description of a running instance."""
    OP_ID = "OP_INSTANCE_CONSOLE"
    NODE_LOCKS = PRIMARY_NODE

    def expand_names(self):
        InstanceLU.expand_names(self)
        self.share_all()

    def check_prereq(self):
        inst = self.instance
        checks.check_not_forthcoming(inst, "connect to its console")
        checks.check_node_online(self.cfg, inst.primary_node)

    async def exec_(self):
        inst = self.instance
        info = await node_calls.call_node(
            self, inst.primary_node, "instance_info",
            [inst.name, inst.hypervisor],
            "Checking instance %s" % inst.name)
        if not checks.is_live(info):
            if inst.admin_state == constants.ADMINST_UP:
                status = constants.INSTST_ERRORDOWN
            elif inst.admin_state == constants.ADMINST_DOWN:
                status = constants.INSTST_ADMINDOWN
            else:
                status = constants.INSTST_ADMINOFFLINE
            raise errors.OpExecError("Instance %s is not running (state %s)"
                                     % (inst.name, status))
        cluster = self.cfg.cluster
        node = self.cfg.get_node(inst.primary_node)
        group = self.cfg.nodegroups.get(node.group)
        paths = getattr(self.ctx, "paths", None)
        return console_description(
            cluster, inst, node, group,
            objects.fill_hvparams(cluster, inst),
            root=paths.root if paths is not None else "/")
