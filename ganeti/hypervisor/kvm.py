"""The KVM hypervisor: one detached qemu process per instance.

qemu is started with ``-daemonize`` (own session, reparented away from the
node daemon) and ``-no-shutdown``: when the guest powers itself off, qemu
stays in the ``shutdown`` run state instead of exiting.  That kept domain is
the evidence of a user shutdown; ``cleanup_instance`` removes it.

State of an instance comes from, in order:

1. the record in ``conf/<name>.json`` (absent: the instance is unknown);
2. whether the pid in ``pid/<name>.pid`` is a live qemu of this instance;
3. if it is, QMP ``query-status``; with ``-no-shutdown`` only a guest can
   bring qemu into ``shutdown`` (host quits and signals end the process), so
   ``shutdown`` without our own stop request means a user shutdown;
4. if it is not, the last ``SHUTDOWN`` event seen on the monitor: a guest
   power-off means ``shutdown``, anything else (no event, a host signal) is a
   ``crashed`` instance.

The driver keeps one QMP connection per instance (qemu serves one client at a
time) and records ``SHUTDOWN`` events into the record as they arrive.
"""

import functools
import ipaddress
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import uuid as uuidlib

import attr
from twisted.internet import defer
from twisted.internet.utils import getProcessOutputAndValue
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from ganeti import constants
from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import pathutils
from ganeti import uidpool
from ganeti.hypervisor import base, migration, params, qmp, state
from ganeti.hypervisor.params import (
    Param, abs_path, abs_path_or_empty, boolean, integer, ip_or_empty,
    one_of, string)

__all__ = ["KvmHypervisor", "KvmFiles", "CommandRunner", "build_command",
           "find_kvm_binary", "nic_down_commands", "nic_up_commands",
           "ovs_vlan_settings", "parse_version", "read_vnc_password",
           "tap_name", "PARAMETERS"]

_log = Logger()

DEFAULT_KVM_PATH = "/usr/bin/kvm"
FALLBACK_BINARY = "qemu-system-x86_64"

NIC_MODELS = {
    "paravirtual": "virtio-net-pci", "e1000": "e1000", "rtl8139": "rtl8139",
    "ne2k_pci": "ne2k_pci", "ne2k_isa": "ne2k_isa", "i82551": "i82551",
    "i82557b": "i82557b", "i82559er": "i82559er", "pcnet": "pcnet",
}
DISK_INTERFACES = {
    "paravirtual": "virtio", "ide": "ide", "scsi": "scsi", "sd": "sd",
    "mtd": "mtd", "pflash": "pflash",
}
BOOT_DEVICES = {"disk": "c", "cdrom": "d", "network": "n", "floppy": "a"}
# security_model values (Ganeti's names)
SM_NONE, SM_USER, SM_POOL = "none", "user", "pool"
SECURITY_MODELS = (SM_NONE, SM_USER, SM_POOL)
NIC_BRIDGED = constants.NIC_MODE_BRIDGED
NIC_ROUTED = constants.NIC_MODE_ROUTED
NIC_OVS = constants.NIC_MODE_OVS
NIC_MODES = (NIC_BRIDGED, NIC_ROUTED, NIC_OVS)

_NOT_SUPPORTED = False

# Ganeti's kvm parameter names and defaults.  Those this driver does not act
# on are accepted at their default only (see params.Param.supported).
PARAMETERS = {
    "acpi": Param(True, boolean),
    "boot_order": Param("disk", one_of(*sorted(BOOT_DEVICES))),
    "cdrom2_image_path": Param("", abs_path_or_empty),
    "cdrom_disk_type": Param("", one_of("", *sorted(DISK_INTERFACES))),
    "cdrom_image_path": Param("", abs_path_or_empty),
    "cpu_cores": Param(0, integer(0)),
    "cpu_mask": Param("all", string, _NOT_SUPPORTED),
    "cpu_sockets": Param(0, integer(0)),
    "cpu_threads": Param(0, integer(0)),
    "cpu_type": Param("", string),
    "disk_aio": Param("threads", one_of("threads", "native", "io_uring")),
    "disk_cache": Param("default", one_of("default", "none", "writethrough",
                                          "writeback")),
    "disk_discard": Param("default", one_of("default", "ignore", "unmap")),
    "disk_type": Param("paravirtual", one_of(*sorted(DISK_INTERFACES))),
    "floppy_image_path": Param("", abs_path_or_empty),
    "initrd_path": Param("", abs_path_or_empty),
    "kernel_args": Param("ro", string),
    "kernel_path": Param("/boot/vmlinuz-3-kvmU", abs_path_or_empty),
    "keymap": Param("", string),
    "kvm_extra": Param("", string),
    "kvm_flag": Param("", one_of("", "enabled", "disabled")),
    "kvm_path": Param(DEFAULT_KVM_PATH, abs_path),
    "kvm_pci_reservations": Param(12, integer(0, 32)),
    "machine_version": Param("", string),
    "mem_path": Param("", abs_path_or_empty),
    "migration_bandwidth": Param(32, integer(1)),
    "migration_caps": Param("", string),
    "migration_downtime": Param(30, integer(1)),
    "migration_mode": Param("live", one_of("live", "non-live")),
    "migration_port": Param(8102, integer(1, 65535)),
    "nic_type": Param("paravirtual", one_of(*sorted(NIC_MODELS))),
    "reboot_behavior": Param("reboot", one_of("reboot", "exit")),
    "root_path": Param("/dev/vda1", string),
    "scsi_controller_type": Param("lsi", string, _NOT_SUPPORTED),
    "security_domain": Param("", string),
    "security_model": Param("none", one_of(*SECURITY_MODELS)),
    "serial_console": Param(True, boolean),
    "serial_speed": Param(38400, integer(1)),
    "soundhw": Param("", string, _NOT_SUPPORTED),
    "spice_bind": Param("", string, _NOT_SUPPORTED),
    "spice_image_compression": Param("", string, _NOT_SUPPORTED),
    "spice_ip_version": Param(0, integer(0), _NOT_SUPPORTED),
    "spice_jpeg_wan_compression": Param("", string, _NOT_SUPPORTED),
    "spice_password_file": Param("", string, _NOT_SUPPORTED),
    "spice_playback_compression": Param(True, boolean, _NOT_SUPPORTED),
    "spice_streaming_video": Param("", string, _NOT_SUPPORTED),
    "spice_tls_ciphers": Param("HIGH:-DES:-3DES:-EXPORT:-DH", string,
                               _NOT_SUPPORTED),
    "spice_use_tls": Param(False, boolean, _NOT_SUPPORTED),
    "spice_use_vdagent": Param(True, boolean, _NOT_SUPPORTED),
    "spice_zlib_glz_wan_compression": Param("", string, _NOT_SUPPORTED),
    "usb_devices": Param("", string, _NOT_SUPPORTED),
    "usb_mouse": Param("", string, _NOT_SUPPORTED),
    "use_chroot": Param(False, boolean, _NOT_SUPPORTED),
    "use_guest_agent": Param(False, boolean, _NOT_SUPPORTED),
    "use_localtime": Param(False, boolean),
    # acted on by the master (may a guest power-off be a USER_down?); on by
    # default, unlike Ganeti's (constants.HVC_DEFAULTS says why)
    "user_shutdown": Param(True, boolean),
    "vga": Param("", string),
    "vhost_net": Param(False, boolean),
    "virtio_net_queues": Param(1, integer(1, 8), _NOT_SUPPORTED),
    "vnc_bind_address": Param("", ip_or_empty),
    "vnc_password_file": Param("", abs_path_or_empty),
    "vnc_tls": Param(False, boolean, _NOT_SUPPORTED),
    "vnc_x509_path": Param("", abs_path_or_empty, _NOT_SUPPORTED),
    "vnc_x509_verify": Param(False, boolean, _NOT_SUPPORTED),
    "vnet_hdr": Param(True, boolean),
}

# query-status run states that mean "exists, CPUs stopped"
_PAUSED_RUNSTATES = frozenset([
    "paused", "prelaunch", "inmigrate", "postmigrate", "finish-migrate",
    "io-error", "suspended", "watchdog", "debug", "save-vm", "restore-vm",
    "colo"])
_CRASHED_RUNSTATES = frozenset(["guest-panicked", "internal-error"])
# SHUTDOWN event reasons that are the guest powering itself off
_GUEST_SHUTDOWN_REASONS = frozenset(["guest-shutdown", "guest-reset"])

_QMP = "qmp"
_SERIAL = "serial"
_SERIAL_LOG = "serial.log"
_CTRL_SUFFIXES = (_QMP, _SERIAL, _SERIAL_LOG)

# sun_path of a UNIX socket holds 107 bytes plus the terminating NUL
_MAX_SOCKET_PATH = 107


@attr.s(frozen=True)
class KvmFiles(object):
    """Files of one qemu process."""
    pidfile = attr.ib()
    qmp = attr.ib()
    serial = attr.ib()
    serial_log = attr.ib()


def find_kvm_binary(kvm_path):
    """The qemu binary to run for ``kvm_path``, or None.

    The default ``/usr/bin/kvm`` is often missing where qemu is installed
    without the KVM wrapper; then qemu-system-x86_64 from PATH does the job.
    """
    if os.access(kvm_path, os.X_OK):
        return kvm_path
    if kvm_path == DEFAULT_KVM_PATH:
        return shutil.which(FALLBACK_BINARY)
    return None


def parse_version(text):
    """``(7, 2, 22)`` from qemu's ``--version`` output, or ()."""
    m = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return ()
    return tuple(int(x) for x in m.groups() if x is not None)


def tap_name(spec, index):
    """A tap device name (at most 15 bytes) unique per instance and NIC."""
    return "gnt%s.%d" % (spec.uuid.replace("-", "")[:8], index)


def _q(value):
    """Escape a value for a qemu ``key=value,...`` option list."""
    return str(value).replace(",", ",,")


def build_command(spec, binary, files, startup_paused=False, incoming=None,
                  runas=None):
    """The qemu command line (argv) for ``spec``; pure, no checks of files.

    ``spec.hvparams`` must have passed the syntax check.  ``incoming`` (e.g.
    ``tcp:192.0.2.1:8102``) starts an empty VM waiting for a migration.
    ``runas`` (a user name or ``UID:GID``) makes qemu drop root for that
    user once it has opened its files (security models user and pool).
    """
    hvp = params.filled(PARAMETERS, spec.hvparams)
    cmd = [binary, "-name", spec.name, "-uuid", spec.uuid]
    # KVM acceleration only when asked for: on this project's machines
    # /dev/kvm exists but Linux guests die with "emulation failure", so the
    # default ("") is software emulation (TCG), which always works.
    cmd += ["-accel", "kvm" if hvp["kvm_flag"] == "enabled" else "tcg"]
    cmd += ["-m", str(spec.memory)]
    smp = str(spec.vcpus)
    for key, opt in (("cpu_sockets", "sockets"), ("cpu_cores", "cores"),
                     ("cpu_threads", "threads")):
        if hvp[key]:
            smp += ",%s=%d" % (opt, hvp[key])
    cmd += ["-smp", smp]
    machine = hvp["machine_version"]
    if not hvp["acpi"]:
        machine = (machine + "," if machine else "") + "acpi=off"
    if machine:
        cmd += ["-machine", machine]
    if hvp["cpu_type"]:
        cmd += ["-cpu", hvp["cpu_type"]]
    # detached, with its pid in a file: the instance outlives the node daemon
    cmd += ["-daemonize", "-pidfile", files.pidfile]
    cmd += ["-nodefaults"]
    cmd += ["-qmp", "unix:%s,server=on,wait=off" % _q(files.qmp)]
    # a guest power-off stops the VM but keeps qemu: the kept domain that
    # proves a user shutdown
    cmd += ["-no-shutdown"]
    if hvp["reboot_behavior"] == "exit":
        # a guest reboot becomes a shutdown, like a power-off
        cmd += ["-no-reboot"]
    if startup_paused:
        cmd += ["-S"]
    if hvp["mem_path"]:
        cmd += ["-mem-path", hvp["mem_path"]]
    if hvp["use_localtime"]:
        cmd += ["-rtc", "base=localtime"]

    if hvp["serial_console"]:
        # a socket for the console, plus a log of everything it printed
        cmd += ["-chardev", "socket,id=serial0,path=%s,server=on,wait=off,"
                "logfile=%s" % (_q(files.serial), _q(files.serial_log)),
                "-serial", "chardev:serial0"]

    if hvp["kernel_path"]:
        cmd += ["-kernel", hvp["kernel_path"]]
        if hvp["initrd_path"]:
            cmd += ["-initrd", hvp["initrd_path"]]
        append = []
        if hvp["root_path"]:
            append.append("root=%s" % hvp["root_path"])
        if hvp["kernel_args"]:
            append.append(hvp["kernel_args"])
        if hvp["serial_console"]:
            append.append("console=ttyS0,%d" % hvp["serial_speed"])
        cmd += ["-append", " ".join(append)]
    else:
        cmd += ["-boot", BOOT_DEVICES[hvp["boot_order"]]]

    disk_if = DISK_INTERFACES[hvp["disk_type"]]
    for disk in spec.disks:
        opts = ["file=%s" % _q(disk.path), "format=%s" % disk.format,
                "if=%s" % disk_if]
        if disk.mode == "ro":
            opts.append("readonly=on")
        if hvp["disk_cache"] != "default":
            opts.append("cache=%s" % hvp["disk_cache"])
        opts.append("aio=%s" % hvp["disk_aio"])
        if hvp["disk_discard"] != "default":
            opts.append("discard=%s" % hvp["disk_discard"])
        cmd += ["-drive", ",".join(opts)]
    cdrom_if = DISK_INTERFACES[hvp["cdrom_disk_type"] or "ide"]
    for image in (hvp["cdrom_image_path"], hvp["cdrom2_image_path"]):
        if image:
            cmd += ["-drive", "file=%s,format=raw,media=cdrom,readonly=on,"
                    "if=%s" % (_q(image), cdrom_if)]
    if hvp["floppy_image_path"]:
        cmd += ["-drive", "file=%s,format=raw,if=floppy" %
                _q(hvp["floppy_image_path"])]

    if not spec.nics:
        cmd += ["-nic", "none"]
    for index, nic in enumerate(spec.nics):
        netdev = ["tap", "id=net%d" % index, "ifname=%s" % tap_name(spec, index),
                  "script=no", "downscript=no",
                  "vnet_hdr=%s" % ("on" if hvp["vnet_hdr"] else "off")]
        if hvp["vhost_net"]:
            netdev.append("vhost=on")
        cmd += ["-netdev", ",".join(netdev),
                "-device", "%s,netdev=net%d,mac=%s" %
                (NIC_MODELS[hvp["nic_type"]], index, nic.mac)]

    if hvp["vnc_bind_address"]:
        address = hvp["vnc_bind_address"]
        if ":" in address:
            address = "[%s]" % address
        vnc = "%s:%d" % (address, spec.network_port - 5900)
        if hvp["vnc_password_file"]:
            # nobody gets in until the password is set over QMP
            vnc += ",password=on"
        cmd += ["-vnc", vnc]
        if hvp["keymap"]:
            cmd += ["-k", hvp["keymap"]]
        cmd += ["-vga", hvp["vga"] or "std"]
    else:
        cmd += ["-display", "none"]
        if hvp["vga"]:
            cmd += ["-vga", hvp["vga"]]

    if runas:
        cmd += ["-runas", runas]
    cmd += shlex.split(hvp["kvm_extra"])
    if incoming:
        cmd += ["-incoming", incoming]
    return cmd


# -- NICs: what the node runs around qemu for each NIC mode -----------------

_VLAN_RE = re.compile(r"^(?:\.(\d+))?((?::\d+)*)$")
_MAX_VLAN = 4095
# a routing table: a number or a name from /etc/iproute2/rt_tables
_TABLE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def ovs_vlan_settings(vlan):
    """``ovs-vsctl set port`` settings for a NIC's ``vlan`` (Ganeti's
    syntax); [] for no VLAN.

    ``N`` or ``.N``: an access port in VLAN N; ``:N[:M...]``: a trunk
    carrying those VLANs; ``.N:M[:K...]``: a hybrid port, untagged in N and
    tagged in the others.  Raises ValueError saying what is wrong.
    """
    if not vlan:
        return []
    text = "." + vlan if vlan.isdigit() else vlan
    match = _VLAN_RE.match(text)
    if match is None or (match.group(1) is None and not match.group(2)):
        raise ValueError(
            "vlan %r is not N or .N (access), :N[:M...] (trunk) or "
            ".N:M[:K...] (untagged N, tagged others)" % vlan)
    tag = int(match.group(1)) if match.group(1) is not None else None
    trunks = [int(x) for x in match.group(2).split(":")[1:]]
    for number in ([tag] if tag is not None else []) + trunks:
        if number > _MAX_VLAN:
            raise ValueError("vlan %r: VLAN id %d is above %d" %
                             (vlan, number, _MAX_VLAN))
    settings = []
    if tag is not None:
        settings.append("tag=%d" % tag)
    if trunks:
        settings.append("trunks=%s" % ",".join(str(t) for t in trunks))
    if tag is not None and trunks:
        settings.append("vlan_mode=native-untagged")
    elif tag is not None:
        settings.append("vlan_mode=access")
    else:
        settings.append("vlan_mode=trunk")
    return settings


def _ip_family(address):
    """("-4", "/32", "ipv4") or ("-6", "/128", "ipv6") for ``address``."""
    if ipaddress.ip_address(address).version == 6:
        return "-6", "/128", "ipv6"
    return "-4", "/32", "ipv4"


def nic_up_commands(spec, index, nic):
    """The commands (argv lists) that connect NIC ``index``'s tap, which
    qemu created, to the node's network; in order.

    bridged: the tap joins the bridge ``link``.  routed: a host route to the
    NIC's IP through the tap (in routing table ``link`` if set, with a rule
    sending the tap's traffic to that table), proxy ARP (proxy NDP for IPv6)
    and forwarding on the tap.  openvswitch: the tap becomes a port of the
    switch ``link``, with the NIC's VLAN settings.
    """
    tap = tap_name(spec, index)
    if nic.mode == NIC_BRIDGED:
        return [["ip", "link", "set", "dev", tap, "master", nic.link, "up"]]
    if nic.mode == NIC_OVS:
        add = ["ovs-vsctl", "--may-exist", "add-port", nic.link, tap]
        settings = ovs_vlan_settings(nic.vlan)
        if settings:
            add += ["--", "set", "port", tap] + settings
        return [add, ["ip", "link", "set", "dev", tap, "up"]]
    if nic.mode == NIC_ROUTED:
        family, prefix, proto = _ip_family(nic.ip)
        table = ["table", nic.link] if nic.link else []
        cmds = [["ip", "link", "set", "dev", tap, "up"]]
        if nic.link:
            cmds.append(["ip", family, "rule", "add", "dev", tap] + table)
        cmds.append(["ip", family, "route", "replace", nic.ip + prefix] +
                    table + ["proto", "static", "dev", tap])
        # '/' separators: the tap's name has a dot
        proxy = "proxy_arp" if proto == "ipv4" else "proxy_ndp"
        for key in (proxy, "forwarding"):
            cmds.append(["sysctl", "-q", "-w",
                         "net/%s/conf/%s/%s=1" % (proto, tap, key)])
        return cmds
    raise errors.HypervisorError("NIC %d: unknown mode %r" % (index, nic.mode))


def nic_down_commands(spec, index, nic):
    """What undoes :func:`nic_up_commands` while the tap may still exist;
    each may fail harmlessly (qemu gone: the kernel already dropped the
    tap, its routes and settings)."""
    tap = tap_name(spec, index)
    if nic.mode == NIC_OVS:
        return [["ovs-vsctl", "--if-exists", "del-port", nic.link, tap]]
    if nic.mode == NIC_ROUTED and nic.ip:
        try:
            family, prefix, _ = _ip_family(nic.ip)
        except ValueError:
            return []
        table = ["table", nic.link] if nic.link else []
        cmds = [["ip", family, "route", "del", nic.ip + prefix] + table +
                ["dev", tap]]
        if nic.link:
            cmds.append(["ip", family, "rule", "del", "dev", tap] + table)
        return cmds
    return []


def _check_nic(spec, index, nic, sys_class_net, which):
    """Node-side problems of one NIC (HypervisorError), before qemu runs."""
    where = "instance %s: NIC %d" % (spec.name, index)
    if nic.mode == NIC_BRIDGED:
        if not nic.link or not os.path.isdir(
                os.path.join(sys_class_net, nic.link, "bridge")):
            raise errors.HypervisorError(
                "%s is bridged to %r, which is not a bridge on this node"
                % (where, nic.link))
    elif nic.mode == NIC_ROUTED:
        if not nic.ip:
            raise errors.HypervisorError(
                "%s is routed but has no IP address; a routed NIC needs one "
                "(the node routes that address to the instance)" % where)
        try:
            ipaddress.ip_address(nic.ip)
        except ValueError:
            raise errors.HypervisorError(
                "%s: ip %r is not an IP address" % (where, nic.ip))
        if nic.link and not _TABLE_RE.match(nic.link):
            raise errors.HypervisorError(
                "%s: link %r of a routed NIC must be a routing table number "
                "or name" % (where, nic.link))
    elif nic.mode == NIC_OVS:
        if not nic.link:
            raise errors.HypervisorError(
                "%s: an openvswitch NIC needs the switch's name as its link"
                % where)
        try:
            ovs_vlan_settings(nic.vlan)
        except ValueError as err:
            raise errors.HypervisorError("%s: %s" % (where, err))
        if which("ovs-vsctl") is None:
            raise errors.HypervisorError(
                "%s is on the openvswitch switch %r, but ovs-vsctl is not "
                "installed on this node (Debian: openvswitch-switch)"
                % (where, nic.link))
    else:
        raise errors.HypervisorError(
            "%s has mode %r; the kvm driver supports %s" %
            (where, nic.mode, ", ".join(NIC_MODES)))


def read_vnc_password(path):
    """The VNC password: the first line of ``path`` (HypervisorError if the
    file cannot be read or that line is empty)."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError as err:
        raise errors.HypervisorError(
            "vnc_password_file %s cannot be read: %s" %
            (path, err.strerror or err))
    password = first.rstrip(b"\r\n").decode("utf-8", "replace")
    if not password:
        raise errors.HypervisorError(
            "vnc_password_file %s is empty (its first line is the password)"
            % path)
    return password


def _user_ids(instance, user):
    """(uid, gid) of the security_domain ``user``; HypervisorError if the
    node has no such user."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise errors.HypervisorError(
            "instance %s: security_domain user %r does not exist on this "
            "node" % (instance, user))
    return entry.pw_uid, entry.pw_gid


class CommandRunner(object):
    """Runs the node's network tools and qemu: resolved on a fixed PATH,
    through the reactor, as ``(stdout, stderr, exit code)``.  Tests put a
    fake in the driver's ``runner`` attribute."""

    PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

    def __init__(self, reactor):
        self._reactor = reactor

    def which(self, tool):
        return shutil.which(tool, path=self.PATH)

    def run(self, argv):
        """Deferred (out, err, code); argv[0] is a path or a tool name."""
        binary = argv[0] if os.path.isabs(argv[0]) else self.which(argv[0])
        if binary is None:
            return defer.succeed((b"", ("%s: command not found" % argv[0])
                                  .encode(), 127))
        return getProcessOutputAndValue(
            binary, argv[1:], env={"PATH": self.PATH}, path="/",
            reactor=self._reactor)


def _check_spec(spec, hvp, which, sys_class_net="/sys/class/net"):
    """Node-local problems that would make qemu fail; raises
    HypervisorError with a message an admin can act on."""
    try:
        uuidlib.UUID(spec.uuid)
    except (ValueError, TypeError, AttributeError):
        raise errors.HypervisorError(
            "instance %s: uuid %r is not a valid UUID" % (spec.name, spec.uuid))
    if hvp["vnc_bind_address"] and (spec.network_port is None or
                                    spec.network_port < 5900):
        raise errors.HypervisorError(
            "instance %s: VNC needs a network port of at least 5900, got %r"
            % (spec.name, spec.network_port))
    for key in ("kernel_path", "initrd_path", "cdrom_image_path",
                "cdrom2_image_path", "floppy_image_path"):
        if hvp[key] and not os.path.exists(hvp[key]):
            raise errors.HypervisorError(
                "instance %s: %s %s does not exist on this node" %
                (spec.name, key, hvp[key]))
    for index, disk in enumerate(spec.disks):
        if not os.path.exists(disk.path):
            raise errors.HypervisorError(
                "instance %s: disk %d (%s) does not exist on this node" %
                (spec.name, index, disk.path))
    for index, nic in enumerate(spec.nics):
        _check_nic(spec, index, nic, sys_class_net, which)
    if hvp["security_model"] == SM_USER:
        _user_ids(spec.name, hvp["security_domain"])


@implementer(hv.IHypervisor)
class KvmHypervisor(base.HypervisorBase):

    name = "kvm"

    #: seconds to wait for the QMP greeting / a command's answer
    MONITOR_TIMEOUT = 10.0
    #: seconds qemu gets to exit after "quit" before SIGKILL
    QUIT_WAIT = 10.0
    KILL_WAIT = 10.0

    def __init__(self, root="/", reactor=None):
        super().__init__(root, reactor)
        self._paths = pathutils.Paths(root)
        #: runs qemu and the network tools (tests put a fake here)
        self.runner = CommandRunner(self._reactor)
        #: where the uid pool looks for processes using a uid
        self.proc_dir = "/proc"
        self._monitors = {}     # name -> QMPProtocol
        self._connecting = {}   # name -> [Deferred] waiting for a monitor
        self._version = None

    # -- parameters ---------------------------------------------------------

    @classmethod
    def check_parameter_syntax(cls, hvparams):
        params.check_params(cls.name, PARAMETERS, hvparams)
        hvp = params.filled(PARAMETERS, hvparams)
        if hvp["initrd_path"] and not hvp["kernel_path"]:
            raise errors.ParameterError(
                "initrd_path", "hypervisor parameter 'initrd_path' needs "
                "'kernel_path' (an initrd is only used for direct kernel boot)")
        if hvp["keymap"] and not hvp["vnc_bind_address"]:
            raise errors.ParameterError(
                "keymap", "hypervisor parameter 'keymap' needs "
                "'vnc_bind_address' (it only affects the VNC console)")
        if hvp["security_model"] == SM_USER and not hvp["security_domain"]:
            raise errors.ParameterError(
                "security_domain", "hypervisor parameter 'security_model' "
                "'user' needs 'security_domain' (the user qemu runs as)")
        if hvp["security_model"] != SM_USER and hvp["security_domain"]:
            raise errors.ParameterError(
                "security_domain", "hypervisor parameter 'security_domain' "
                "is only used with security_model 'user', not %r" %
                hvp["security_model"])
        try:
            shlex.split(hvp["kvm_extra"])
        except ValueError as err:
            raise errors.ParameterError(
                "kvm_extra", "hypervisor parameter 'kvm_extra' cannot be "
                "split into arguments: %s" % err)

    def validate_parameters(self, hvparams):
        return defer.maybeDeferred(self._validate, hvparams)

    def _validate(self, hvparams):
        self.check_parameter_syntax(hvparams)
        hvp = params.filled(PARAMETERS, hvparams)
        if find_kvm_binary(hvp["kvm_path"]) is None:
            raise errors.ParameterError(
                "kvm_path", "hypervisor parameter 'kvm_path': %s is not an "
                "executable on this node" % hvp["kvm_path"])
        for key in ("kernel_path", "initrd_path", "cdrom_image_path",
                    "cdrom2_image_path", "floppy_image_path"):
            if hvp[key] and not os.path.isfile(hvp[key]):
                raise errors.ParameterError(
                    key, "hypervisor parameter '%s': %s is not a file on "
                    "this node" % (key, hvp[key]))
        if hvp["mem_path"] and not os.path.isdir(hvp["mem_path"]):
            raise errors.ParameterError(
                "mem_path", "hypervisor parameter 'mem_path': %s is not a "
                "directory on this node" % hvp["mem_path"])
        if hvp["security_model"] == SM_USER:
            try:
                pwd.getpwnam(hvp["security_domain"])
            except KeyError:
                raise errors.ParameterError(
                    "security_domain", "hypervisor parameter "
                    "'security_domain': user %r does not exist on this node"
                    % hvp["security_domain"])

    # -- public API ----------------------------------------------------------

    # (starting, stopping and the like: base.HypervisorBase)

    def get_instance_info(self, name):
        return defer.Deferred.fromCoroutine(self._info(name))

    def get_all_instances_info(self):
        return defer.Deferred.fromCoroutine(self._all_info())

    def get_node_info(self):
        return defer.Deferred.fromCoroutine(self._node_info())

    def verify(self, hvparams=None):
        return defer.Deferred.fromCoroutine(self._verify(hvparams or {}))

    def close(self):
        return defer.Deferred.fromCoroutine(self._close())

    # -- migration (qemu's own, over TCP; see ganeti.hypervisor.migration) --

    def migration_info(self, name):
        return defer.Deferred.fromCoroutine(self._migration_info(name))

    def migrate_instance(self, name, address, port, live=True):
        return defer.Deferred.fromCoroutine(
            self._migrate(name, address, port, live))

    def get_migration_status(self, name):
        return defer.Deferred.fromCoroutine(self._migration_status(name))

    def abort_migration(self, name):
        return defer.Deferred.fromCoroutine(self._abort_migration(name))

    # -- files and processes -------------------------------------------------

    def files(self, name):
        return KvmFiles(pidfile=self._rt.pid_path(name),
                        qmp=self._rt.ctrl_path(name, _QMP),
                        serial=self._rt.ctrl_path(name, _SERIAL),
                        serial_log=self._rt.ctrl_path(name, _SERIAL_LOG))

    def _pid(self, name):
        """The pid of the instance's live qemu, or None."""
        files = self.files(name)
        pid = state.read_pid_file(files.pidfile)
        # the QMP socket path is on qemu's command line: no pid reuse
        if state.process_alive(pid, marker=files.qmp):
            return pid
        return None

    # -- the monitor ---------------------------------------------------------

    async def _monitor(self, name):
        """The shared QMP connection to ``name``'s qemu."""
        proto = self._monitors.get(name)
        if proto is not None and not proto.lost:
            return proto
        if name in self._connecting:
            d = defer.Deferred()
            self._connecting[name].append(d)
            return await d
        waiters = self._connecting[name] = []
        try:
            proto = await qmp.connect_qmp(self._reactor, self.files(name).qmp,
                                          self.MONITOR_TIMEOUT)
        except Exception:
            failure = Failure()
            del self._connecting[name]
            for d in waiters:
                d.errback(failure)
            failure.raiseException()
        del self._connecting[name]
        proto.add_event_listener(functools.partial(self._on_event, name))
        self._monitors[name] = proto
        proto.when_lost().addCallback(self._forget_monitor, name, proto)
        for d in waiters:
            d.callback(proto)
        return proto

    def _forget_monitor(self, _, name, proto):
        if self._monitors.get(name) is proto:
            del self._monitors[name]

    def _on_event(self, name, event, data, timestamp):
        if event == "SHUTDOWN":
            _log.info("Instance {name}: SHUTDOWN guest={guest} reason={reason}",
                      name=name, guest=data.get("guest"),
                      reason=data.get("reason"))
            if not data.get("guest"):
                # host side (our quit, a signal): keep the guest's last word
                return
            self._rt.update(name, shutdown={
                "guest": bool(data.get("guest")),
                "reason": data.get("reason"), "time": timestamp})
        elif event == "RESUME":
            record = self._rt.read(name)
            if record is not None and record.shutdown:
                self._rt.update(name, shutdown=None)

    async def _qmp(self, name, command, arguments=None, timeout=None):
        monitor = await self._monitor(name)
        d = monitor.execute(command, arguments)
        d.addTimeout(timeout or self.MONITOR_TIMEOUT, self._reactor)
        try:
            return await d
        except defer.TimeoutError:
            raise errors.HypervisorError(
                "instance %s: no answer to QMP %s within %ss" %
                (name, command, timeout or self.MONITOR_TIMEOUT))

    async def _drop_monitor(self, name):
        proto = self._monitors.pop(name, None)
        if proto is not None and not proto.lost:
            lost = proto.when_lost()
            proto.transport.loseConnection()
            await lost

    async def _close(self):
        for name in list(self._monitors):
            await self._drop_monitor(name)

    # -- state ---------------------------------------------------------------

    async def _runstate(self, name):
        """qemu's run state, or None if its monitor does not answer."""
        try:
            status = await self._qmp(name, "query-status")
            return status["status"]
        except errors.HypervisorError as err:
            _log.warn("Instance {name}: cannot query qemu: {err}",
                      name=name, err=err)
            return None

    async def _info(self, name):
        record = self._rt.read(name)
        if record is None:
            return None
        pid = self._pid(name)
        reason = None
        if pid is not None:
            runstate = await self._runstate(name)
            if runstate is None and self._pid(name) is None:
                pid = None      # it died while we asked
        if pid is None:
            last = record.shutdown or {}
            if last.get("guest") and last.get("reason") in _GUEST_SHUTDOWN_REASONS:
                current, reason = hv.SHUTDOWN, last["reason"]
            else:
                current, reason = hv.CRASHED, "process-exited"
        elif runstate is None:
            # alive but mute: it still holds its resources, so it must not
            # look down (a restart would start a second copy)
            current, reason = hv.RUNNING, "monitor-unresponsive"
        elif runstate == "running":
            current = hv.RUNNING
        elif runstate == "shutdown":
            last = record.shutdown or {}
            if last.get("reason") == "guest-panic":
                current, reason = hv.CRASHED, "guest-panicked"
            else:
                current = hv.SHUTDOWN
                reason = last.get("reason") or "guest-shutdown"
        elif runstate in _CRASHED_RUNSTATES:
            current, reason = hv.CRASHED, runstate
        else:
            current = hv.PAUSED
            reason = None if runstate == "paused" else runstate
        return self._instance_info(name, record, pid, current, reason)

    def observe_instances(self):
        """The instances from the runtime files and the process table
        only: qemu's QMP socket takes one client at a time and the node
        daemon keeps its connection, so an observer must not open one.
        A live qemu shows as running (paused is not told apart)."""
        def infos():
            result = []
            for name in self._rt.names():
                record = self._rt.read(name)
                if record is None:
                    continue
                pid = self._pid(name)
                reason = None
                if pid is not None:
                    current = hv.RUNNING
                else:
                    last = record.shutdown or {}
                    if last.get("guest") and \
                            last.get("reason") in _GUEST_SHUTDOWN_REASONS:
                        current, reason = hv.SHUTDOWN, last["reason"]
                    else:
                        current, reason = hv.CRASHED, "process-exited"
                result.append(self._instance_info(name, record, pid,
                                                  current, reason))
            return result
        return defer.maybeDeferred(infos)

    async def _all_info(self):
        try:
            infos = await defer.gatherResults(
                [self.get_instance_info(n) for n in self._rt.names()],
                consumeErrors=True)
        except defer.FirstError as err:
            err.subFailure.raiseException()
        return [i for i in infos if i is not None]

    async def _hv_version(self, binary):
        if self._version is None and binary:
            out, err, code = await getProcessOutputAndValue(
                binary, ["--version"], env={}, path="/",
                reactor=self._reactor)
            if code == 0:
                self._version = parse_version(out.decode("utf-8", "replace"))
        return self._version or ()

    async def _node_info(self):
        total, avail = hv.read_meminfo()
        held = untouched = 0
        for name in self._rt.names():
            record = self._rt.read(name)
            pid = self._pid(name)
            if record is None or pid is None:
                continue
            held += record.spec.memory
            # guest memory not touched yet is promised but not used: it is
            # not free for another instance
            untouched += max(0, record.spec.memory - _rss_mib(pid))
        cpus, nodes, sockets = hv.host_cpu_info()
        version = await self._hv_version(find_kvm_binary(DEFAULT_KVM_PATH))
        return hv.NodeInfo(memory_total=total,
                           memory_free=max(0, avail - untouched),
                           memory_dom0=max(0, total - avail - (held - untouched)),
                           memory_hv=held, cpu_total=cpus, cpu_nodes=nodes,
                           cpu_sockets=sockets, hv_version=version)

    async def _verify(self, hvparams):
        problems = []
        kvm_path = hvparams.get("kvm_path", DEFAULT_KVM_PATH)
        binary = find_kvm_binary(kvm_path)
        if binary is None:
            problems.append(
                "qemu binary not found: %s is missing%s" %
                (kvm_path, " and %s is not on PATH" % FALLBACK_BINARY
                 if kvm_path == DEFAULT_KVM_PATH else ""))
        else:
            out, err, code = await getProcessOutputAndValue(
                binary, ["--version"], env={}, path="/", reactor=self._reactor)
            if code != 0:
                problems.append("%s --version failed (exit %s): %s" %
                                (binary, code, err.decode("utf-8", "replace")))
        try:
            self._rt.ensure()
        except OSError as err:
            problems.append("cannot create runtime directory %s: %s" %
                            (self._rt.base, err))
        return problems

    # -- operations ----------------------------------------------------------

    async def _start(self, spec, startup_paused, incoming=None):
        hv.check_instance_name(spec.name)
        self.check_parameter_syntax(spec.hvparams)
        hvp = params.filled(PARAMETERS, spec.hvparams)
        await self._clean_up_kept(spec.name, await self._info(spec.name))
        binary = find_kvm_binary(hvp["kvm_path"])
        if binary is None:
            raise errors.HypervisorError(
                "instance %s: qemu binary %s not found" %
                (spec.name, hvp["kvm_path"]))
        _check_spec(spec, hvp, self.runner.which)
        vnc_password = None
        if hvp["vnc_password_file"] and hvp["vnc_bind_address"]:
            vnc_password = read_vnc_password(hvp["vnc_password_file"])
        files = self.files(spec.name)
        for path in (files.qmp, files.serial):
            if len(path.encode()) > _MAX_SOCKET_PATH:
                raise errors.HypervisorError(
                    "instance %s: socket path %s is longer than %d bytes; "
                    "use a shorter root directory or instance name" %
                    (spec.name, path, _MAX_SOCKET_PATH))
        self._rt.ensure()
        self._rt.remove(spec.name, _CTRL_SUFFIXES)  # stale files of a crash
        locked = self._take_uid(spec, hvp)
        extra = {}
        runas = None
        if hvp["security_model"] == SM_USER:
            runas = hvp["security_domain"]
        elif locked is not None:
            runas = "%d:%d" % (locked.uid, locked.uid)
            extra["uid"] = locked.uid
        try:
            self._rt.write(state.InstanceRecord(
                spec=spec, started=self._reactor.seconds(), extra=extra))
            if locked is not None:
                self._rt.update(spec.name, extra=dict(
                    extra, chowned=_hand_over(
                        [d.path for d in spec.disks], locked.uid)))
            cmd = build_command(spec, binary, files, startup_paused, incoming,
                                runas=runas)
            _log.info("Starting instance {name}: {cmd}", name=spec.name,
                      cmd=" ".join(shlex.quote(c) for c in cmd))
            out, err, code = await self.runner.run(cmd)
            pid = state.read_pid_file(files.pidfile)
            if code != 0 or pid is None:
                raise errors.HypervisorError(
                    "qemu failed to start instance %s (exit %s): %s" %
                    (spec.name, code, err.decode("utf-8", "replace").strip()))
            self._rt.update(spec.name, pid=pid)
            if locked is not None:
                # its own control files, should qemu need them again
                _hand_over([files.qmp, files.serial, files.serial_log],
                           locked.uid)
            await self._attach_nics(spec)
            # watch it from the start, so its SHUTDOWN events are recorded
            await self._monitor(spec.name)
            if vnc_password is not None:
                await self._set_vnc_password(spec.name, vnc_password)
        except Exception:
            failure = Failure()
            try:
                await self._end(spec.name, locked)
            except Exception:
                # qemu could not be ended: it keeps its uid; the start's
                # own error is the one to report
                _log.failure("Instance {name}: undoing the failed start",
                             name=spec.name)
                if locked is not None:
                    locked.unlock()
            failure.raiseException()
        if locked is not None:
            # qemu runs with the uid now: that keeps it from other requests
            locked.unlock()
        _log.info("Started instance {name} (pid {pid})", name=spec.name,
                  pid=pid)

    async def _set_vnc_password(self, name, password):
        """The VNC password over QMP (qemu 7.x: ``change-vnc-password``;
        ``set_password`` where that is missing)."""
        try:
            await self._qmp(name, "change-vnc-password",
                            {"password": password})
        except qmp.QMPError as err:
            if err.error_class != "CommandNotFound":
                raise errors.HypervisorError(
                    "instance %s: cannot set the VNC password: %s" %
                    (name, err))
            await self._qmp(name, "set_password",
                            {"protocol": "vnc", "password": password})

    def _uid_allocator(self):
        lock_dir = self._paths.uid_pool_lock_dir
        os.makedirs(lock_dir, mode=0o750, exist_ok=True)
        return uidpool.UidAllocator(lock_dir, proc_dir=self.proc_dir)

    def _take_uid(self, spec, hvp):
        """For security_model pool: a locked unused uid of the cluster's
        uid pool (ssconf_uid_pool); None for the other models."""
        if hvp["security_model"] != SM_POOL:
            return None
        path = self._paths.ssconf_file("uid_pool")
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        try:
            pool = uidpool.parse_uid_pool(text, separator="\n")
        except errors.ParseError as err:
            raise errors.HypervisorError(
                "instance %s: cannot read the cluster's uid pool from %s: %s"
                % (spec.name, path, err))
        if not pool:
            raise errors.HypervisorError(
                "instance %s: security_model is 'pool' but the cluster's uid"
                " pool is empty (set one with gnt-cluster modify --uid-pool)"
                % spec.name)
        try:
            return self._uid_allocator().request(
                uidpool.expand_uid_pool(pool))
        except errors.ReservationError as err:
            raise errors.HypervisorError(
                "instance %s: security_model is 'pool' but the cluster's uid"
                " pool has no free uid: %s" % (spec.name, err))

    async def _attach_nics(self, spec):
        """Connect each NIC's tap (created by qemu) as its mode says."""
        for index, nic in enumerate(spec.nics):
            for argv in nic_up_commands(spec, index, nic):
                out, err, code = await self.runner.run(argv)
                if code != 0:
                    raise errors.HypervisorError(
                        "instance %s: setting up NIC %d (%s, link %r) failed:"
                        " %s: %s" %
                        (spec.name, index, nic.mode, nic.link, " ".join(argv),
                         err.decode("utf-8", "replace").strip()))

    async def _end(self, name, locked=None):
        """qemu gone (:meth:`_destroy`), then what the node set up for it
        undone: NIC routes and rules, switch ports, disk owners, the pool
        uid (``locked``, if the start still holds it); the record last."""
        record = self._rt.read(name)
        await self._destroy(name)
        if record is not None:
            spec = record.spec
            for index, nic in enumerate(spec.nics):
                for argv in nic_down_commands(spec, index, nic):
                    out, err, code = await self.runner.run(argv)
                    if code != 0:
                        _log.debug("Instance {name}: {cmd}: {err}", name=name,
                                   cmd=" ".join(argv),
                                   err=err.decode("utf-8", "replace").strip())
            _hand_back(record.extra.get("chowned") or {})
        uid = locked if locked is not None else \
            (record.extra.get("uid") if record is not None else None)
        if uid is not None:
            try:
                self._uid_allocator().release(uid)
            except errors.GenericError as err:
                _log.warn("Instance {name}: cannot release uid {uid}: {err}",
                          name=name, uid=int(uid), err=err)
        self._rt.remove(name, _CTRL_SUFFIXES)

    async def _destroy(self, name):
        """End qemu: QMP quit (lets it close its files), SIGKILL if that
        does not work."""
        pid = self._pid(name)
        if pid is not None:
            marker = self.files(name).qmp

            def exited():
                # the process itself, not its pid file: qemu removes that
                # while it is still exiting
                return not state.process_alive(pid, marker=marker)
            try:
                await self._qmp(name, "quit", timeout=self.QUIT_WAIT)
            except errors.HypervisorError as err:
                # QMPConnectionLost included: qemu may exit before answering
                _log.info("Instance {name}: quit: {err}", name=name, err=err)
            gone = await state.wait_until(self._reactor, exited,
                                          self.QUIT_WAIT)
            if not gone:
                _log.warn("Instance {name} ignored quit, killing it", name=name)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                gone = await state.wait_until(self._reactor, exited,
                                              self.KILL_WAIT)
            if not gone:
                raise errors.HypervisorError(
                    "could not kill instance %s (pid %d)" % (name, pid))
        await self._drop_monitor(name)

    async def _stop(self, name, force, timeout):
        if self._rt.update(name, intent=state.INTENT_STOP) is None:
            _log.info("Instance {name} is already stopped", name=name)
            return
        if not force and self._pid(name) is not None:
            await self._powerdown(name, timeout)
        await self._end(name)
        _log.info("Stopped instance {name}", name=name)

    async def _powerdown(self, name, timeout):
        """Ask a running guest to power off; wait up to ``timeout`` for
        it.  Best effort: whatever happens, the caller destroys qemu."""
        if await self._runstate(name) != "running":
            return          # paused, already off, or mute: nobody to ask
        try:
            monitor = await self._monitor(name)
        except errors.HypervisorError as err:
            _log.warn("Instance {name}: no monitor: {err}", name=name, err=err)
            return
        # registered before asking, so a quick guest is not missed; qemu
        # exiting ends the wait too
        done = monitor.wait_for_event("SHUTDOWN")
        try:
            await self._qmp(name, "system_powerdown")
        except errors.HypervisorError as err:
            done.cancel()
            done.addErrback(lambda _: None)
            _log.warn("Instance {name}: system_powerdown: {err}",
                      name=name, err=err)
            return
        done.addTimeout(timeout, self._reactor)
        try:
            await done
        except defer.TimeoutError:
            _log.warn("Instance {name} did not power off within {timeout}s",
                      name=name, timeout=timeout)
        except qmp.QMPConnectionLost:
            pass

    async def _cleanup(self, name):
        if self._rt.read(name) is None:
            return
        await self._end(name)
        _log.info("Cleaned up instance {name}", name=name)

    async def _live(self, name, wanted):
        self._check_state(name, await self._info(name), wanted)
        return self._rt.read(name)

    async def _reboot(self, name):
        record = await self._live(name, {hv.RUNNING})
        hvp = params.filled(PARAMETERS, record.spec.hvparams)
        if hvp["reboot_behavior"] == "exit":
            # -no-reboot turns every reset into a shutdown, including the
            # one the firmware itself does right after ours; so a reboot is
            # a fresh qemu with the same spec (the guest sees a cold boot)
            _log.info("Rebooting {name} by restarting qemu", name=name)
            await self._end(name)
            await self._start(record.spec, False)
            return
        monitor = await self._monitor(name)
        reset = monitor.wait_for_event("RESET")
        reset.addTimeout(self.MONITOR_TIMEOUT, self._reactor)
        try:
            await self._qmp(name, "system_reset")
            await reset
        except defer.TimeoutError:
            raise errors.HypervisorError(
                "instance %s: no reset within %ss" %
                (name, self.MONITOR_TIMEOUT))
        finally:
            if not reset.called:
                reset.cancel()
                reset.addErrback(lambda _: None)

    async def _resume(self, name):
        await self._live(name, {hv.PAUSED, hv.RUNNING})
        await self._qmp(name, "cont")

    # -- migration -------------------------------------------------------------

    #: seconds the target gets to leave the "inmigrate" state once the
    #: source says the transfer completed
    INCOMING_WAIT = 30.0

    async def _migration_info(self, name):
        record = await self._live(name, {hv.RUNNING, hv.PAUSED})
        return {"spec": record.spec.to_dict(), "started": record.started,
                "hypervisor": self.name,
                "hv_version": list(await self._hv_version(find_kvm_binary(
                    params.filled(PARAMETERS, record.spec.hvparams)
                    ["kvm_path"])))}

    async def _accept(self, spec, info, address, port):
        hv.check_instance_name(spec.name)
        current = await self._info(spec.name)
        if current is not None and current.live:
            raise errors.HypervisorError(
                "instance %s is already running on this node, cannot accept"
                " it" % spec.name)
        hvp = params.filled(PARAMETERS, spec.hvparams)
        wanted = port or hvp["migration_port"]
        chosen = _port_free(address, wanted)
        if chosen is None:
            # taken (another migration to this node?): any free port will
            # do, the source is told which
            chosen = _port_free(address, 0)
            if chosen is None:
                raise errors.HypervisorError(
                    "instance %s: cannot listen on %s for the incoming"
                    " migration" % (spec.name, address))
            _log.info("Migration port {wanted} busy on {address}, using"
                      " {port}", wanted=wanted, address=address,
                      port=chosen)
        await self._start(spec, False, incoming=incoming_uri(address, chosen))
        return {"address": address, "port": chosen}

    async def _migrate(self, name, address, port, live):
        record = await self._live(name, {hv.RUNNING, hv.PAUSED})
        hvp = params.filled(PARAMETERS, record.spec.hvparams)
        await self._qmp(name, "migrate-set-parameters", {
            "max-bandwidth": hvp["migration_bandwidth"] * 1024 * 1024,
            "downtime-limit": hvp["migration_downtime"]})
        caps = [c for c in hvp["migration_caps"].split(":") if c]
        if caps:
            await self._qmp(name, "migrate-set-capabilities", {
                "capabilities": [{"capability": c, "state": True}
                                 for c in caps]})
        if not live:
            # non-live: the guest stops, its memory is copied once
            await self._qmp(name, "stop")
        _log.info("Migrating {name} to {address}:{port} ({mode})", name=name,
                  address=address, port=port,
                  mode="live" if live else "non-live")
        try:
            await self._qmp(name, "migrate",
                            {"uri": incoming_uri(address, port)})
        except errors.HypervisorError:
            if not live:
                await self._qmp(name, "cont")
            raise

    async def _migration_status(self, name):
        if self._pid(name) is None:
            raise errors.HypervisorError("instance %s is not running on this"
                                         " node" % name)
        answer = await self._qmp(name, "query-migrate")
        ram = answer.get("ram") or {}
        return migration.MigrationStatus(
            answer.get("status", migration.NONE),
            transferred_ram=ram.get("transferred"),
            total_ram=ram.get("total"),
            error=answer.get("error-desc"))

    async def _abort_migration(self, name):
        await self._qmp(name, "migrate_cancel")

    async def _finalize_dst(self, name, info, success):
        if not success:
            # the received copy goes; the source keeps the instance
            await self._cleanup(name)
            return
        ok = await state.wait_until(
            self._reactor,
            lambda: defer.Deferred.fromCoroutine(self._runstate(name))
            .addCallback(lambda s: s not in (None, "inmigrate")),
            self.INCOMING_WAIT)
        runstate = await self._runstate(name)
        if not ok or runstate is None:
            raise errors.HypervisorError(
                "instance %s: the incoming migration did not finish (qemu"
                " state %s)" % (name, runstate))
        if runstate in ("paused", "postmigrate", "finish-migrate"):
            # a non-live migration ends paused on this side
            await self._qmp(name, "cont")
        elif runstate != "running":
            raise errors.HypervisorError(
                "instance %s is %s after the migration" % (name, runstate))
        self._rt.update(name, intent=state.INTENT_RUN)

    async def _finalize_src(self, name, success, live):
        if success:
            # qemu stays in "postmigrate" holding the old copy: end it
            if self._rt.update(name, intent=state.INTENT_STOP) is None:
                return
            await self._end(name)
            return
        if self._pid(name) is None:
            raise errors.HypervisorError(
                "instance %s is not running on this node any more after the"
                " failed migration" % name)
        runstate = await self._runstate(name)
        if runstate in ("paused", "postmigrate", "finish-migrate"):
            # stopped for a non-live migration, or the target failed after
            # the switch-over: the guest runs here again
            await self._qmp(name, "cont")


def _hand_over(paths, uid):
    """Give ``paths`` (symlinks followed) to ``uid`` (group ``uid`` too);
    returns ``{real path: [old uid, old gid]}`` for :func:`_hand_back`."""
    previous = {}
    for path in paths:
        real = os.path.realpath(path)
        if real in previous:
            continue
        try:
            st = os.stat(real)
            os.chown(real, uid, uid)
        except FileNotFoundError:
            continue
        except OSError as err:
            _hand_back(previous)
            raise errors.HypervisorError(
                "cannot give %s to uid %d: %s" % (real, uid, err))
        previous[real] = [st.st_uid, st.st_gid]
    return previous


def _hand_back(previous):
    """Undo :func:`_hand_over` (best effort: gone files are skipped)."""
    for path, (uid, gid) in previous.items():
        try:
            os.chown(path, uid, gid)
        except OSError as err:
            _log.warn("Cannot give {path} back to {uid}:{gid}: {err}",
                      path=path, uid=uid, gid=gid, err=err)


def _port_free(address, port):
    """Whether ``port`` can be listened on at ``address`` right now."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        return sock.getsockname()[1]
    except OSError:
        return None
    finally:
        sock.close()


def incoming_uri(address, port):
    host = "[%s]" % address if ":" in address else address
    return "tcp:%s:%d" % (host, port)


def _rss_mib(pid):
    """Resident memory of ``pid`` in MiB (0 if unknown)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
