"""The cluster's master IP address on this node.

Clients (the remote API's, and Ganeti's tools) reach the master at the
cluster's master IP; a master failover moves it.  Activating it adds the
address to the master network device (``ip address add``), unless the
device is the loopback device and the address is in 127.0.0.0/8: the
kernel delivers that whole network locally already, which is what a
virtual cluster on one machine uses.  Either way the node records that it
holds the address (``<run dir>/master-ip``), which is what
``gnt-cluster verify`` and the failover look at.

With the cluster parameter ``use_external_mip_script`` the admin's script
``<root>/etc/ganeti/scripts/master-ip-setup`` does the work instead, as
Ganeti's: called with ``start`` or ``stop`` and the environment variables
MASTER_IP, MASTER_NETMASK, MASTER_NETDEV and CLUSTER_IP_VERSION.

Blocking (runs in the node daemon's thread pool).
"""

import ipaddress
import json
import os
import subprocess

from ganeti import errors

HELD_FILE = "master-ip"
EXTERNAL_SCRIPT = "etc/ganeti/scripts/master-ip-setup"
#: seconds a setup command may take
TIMEOUT = 30


def external_script_wanted(paths):
    """The cluster's ``use_external_mip_script`` from this node's
    config.data (the master has one); False without it."""
    try:
        with open(paths.config_file) as f:
            data = json.load(f)
        return bool(data["cluster"].get("use_external_mip_script"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _held_path(paths):
    return os.path.join(paths.run_dir, HELD_FILE)


def held(paths):
    """``{"ip", "netmask", "netdev"}`` this node holds, or None."""
    try:
        with open(_held_path(paths)) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and value.get("ip") else None


def held_address(paths):
    value = held(paths)
    return value["ip"] if value else None


def _check(ip, netmask, netdev):
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        raise errors.ParameterError("master_ip", "%r is not an IP address"
                                    % (ip,))
    try:
        bits = int(netmask) if netmask not in (None, "") else \
            address.max_prefixlen
    except (TypeError, ValueError):
        raise errors.ParameterError("master_netmask", "%r is not a prefix"
                                    " length" % (netmask,))
    if not 0 < bits <= address.max_prefixlen:
        raise errors.ParameterError("master_netmask", "%d is not a prefix"
                                    " length for %s" % (bits, address))
    if not netdev or "/" in netdev or netdev.startswith("-"):
        raise errors.ParameterError("master_netdev", "%r is not a network"
                                    " device name" % (netdev,))
    return address, bits


def _local_anyway(address, netdev):
    return netdev == "lo" and address.is_loopback


def _run(argv, env=None):
    try:
        result = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                                capture_output=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise errors.CommandError("%s failed: %s" % (argv[0], err))
    return result.returncode, (result.stdout + result.stderr).decode(
        "utf-8", "replace").strip()


def _script(paths, action, address, bits, netdev):
    script = os.path.join(paths.root, EXTERNAL_SCRIPT)
    if not os.access(script, os.X_OK):
        raise errors.CommandError("the external master IP script %s is"
                                  " missing or not executable" % script)
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
           "MASTER_IP": str(address), "MASTER_NETMASK": str(bits),
           "MASTER_NETDEV": netdev,
           "CLUSTER_IP_VERSION": str(address.version)}
    code, text = _run([script, action], env)
    if code:
        raise errors.CommandError("%s %s failed (exit %d): %s"
                                  % (script, action, code, text))


def _ip(action, address, bits, netdev):
    code, text = _run(["ip", "address", action,
                       "%s/%d" % (address, bits), "dev", netdev])
    if code == 0:
        return
    if action == "add" and "File exists" in text:
        return      # already there
    if action == "del" and "Cannot assign" in text:
        return      # already gone
    raise errors.CommandError("ip address %s %s/%d dev %s failed: %s"
                              % (action, address, bits, netdev, text))


def activate(paths, ip, netmask, netdev, external_script=False):
    """Take the master IP; returns how (``"loopback"``, ``"ip"``,
    ``"script"``)."""
    address, bits = _check(ip, netmask, netdev)
    if external_script:
        _script(paths, "start", address, bits, netdev)
        how = "script"
    elif _local_anyway(address, netdev):
        how = "loopback"
    else:
        _ip("add", address, bits, netdev)
        how = "ip"
    os.makedirs(paths.run_dir, exist_ok=True)
    tmp = _held_path(paths) + ".new"
    with open(tmp, "w") as f:
        json.dump({"ip": str(address), "netmask": bits, "netdev": netdev,
                   "how": how}, f)
    os.rename(tmp, _held_path(paths))
    return how


def deactivate(paths, external_script=False):
    """Give the master IP up (what :func:`activate` recorded); None when
    this node did not hold it."""
    value = held(paths)
    if value is None:
        return None
    address, bits = _check(value["ip"], value.get("netmask"),
                           value.get("netdev"))
    how = value.get("how")
    if how == "script" or external_script:
        _script(paths, "stop", address, bits, value["netdev"])
    elif how == "ip":
        _ip("del", address, bits, value["netdev"])
    os.unlink(_held_path(paths))
    return value["ip"]
