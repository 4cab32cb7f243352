"""A tiny real Linux guest, built from Debian packages, for qemu.

Used by the kvm tests (``tests/integration/guest.py``) and by ``python -m
ganeti.dev.demo --kvm``.  :func:`get_guest` returns a :class:`Guest` (kernel + initramfs)
or raises :class:`GuestUnavailable` saying why.  The guest is built once
and cached under ``$GANETI_GUEST_CACHE`` or ``$GANETI_TEST_CACHE`` (default
``~/.cache/ganeti-twisted-tests``, shared by the tests and the demo):

* ``apt-get download`` of a ``linux-image-*-cloud-amd64`` kernel and
  ``busybox-static``, unpacked with ``dpkg-deb``;
* an initramfs made with busybox's own ``cpio -o -H newc`` (the machine may
  have no cpio) whose ``/init`` mounts proc/sys/devtmpfs, loads the virtio
  modules and then does what the kernel command line says:

  ``ganeti_test=poweroff``  power off right after boot (a user shutdown)
  ``ganeti_test=reboot``    reboot right after boot
  ``ganeti_test=idle``      stay up (the default); the ACPI power button
                            (QMP ``system_powerdown``) powers it off cleanly

The console (ttyS0) shows ``ganeti-test: booted, mode=...`` and
``ganeti-test: idle`` so tests can tell how far it got; an idle guest then
runs a shell on it (what a test types there is answered).

Boot it with the kvm hypervisor's ``kernel_path``/``initrd_path`` set to
:attr:`Guest.kernel`/:attr:`Guest.initrd`, ``root_path`` empty and
``kernel_args`` ``ganeti_test=<mode>``.

This is tooling, not daemon code: it runs its commands with subprocess,
before any reactor is involved.
"""

import fcntl
import glob
import gzip
import io
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

__all__ = ["Guest", "GuestUnavailable", "get_guest", "qemu_binary",
           "cache_dir", "RECIPE"]

# Bump when the recipe changes, so old caches are not reused.
RECIPE = 4

MODULES = ["virtio_ring", "virtio", "virtio_pci_modern_dev",
           "virtio_pci_legacy_dev", "virtio_pci", "virtio_blk", "failover",
           "net_failover", "virtio_net", "evdev", "button"]

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in %(modules)s; do
  [ -e /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko
done
mode=idle
for arg in $(cat /proc/cmdline); do
  case "$arg" in ganeti_test=*) mode="${arg#ganeti_test=}";; esac
done
echo "ganeti-test: booted, mode=$mode"
case "$mode" in
  poweroff) sync; poweroff -f ;;
  reboot) sync; reboot -f ;;
esac
# like an OS running acpid: the power button powers off cleanly.  The input
# device may show up only after a while (slow boots on a loaded host), so
# wait for it before saying we are idle.
armed=no
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  for d in /sys/class/input/event*; do
    if [ "$(cat $d/device/name 2>/dev/null)" = "Power Button" ]; then
      # opened here, before "armed" is said: a press that comes before the
      # reader below gets to run waits in the device's queue
      exec 3</dev/input/${d##*/}
      ( dd of=/dev/null bs=24 count=1 <&3 2>/dev/null
        echo "ganeti-test: power button pressed"; sync; poweroff -f ) &
      armed=yes
      break
    fi
  done
  [ "$armed" = yes ] && break
  sleep 1
done
echo "ganeti-test: power button armed=$armed"
echo "ganeti-test: idle"
# a shell on the console (ttyS0), so that tests can type into it
while :; do sh </dev/console >/dev/console 2>&1; sleep 1; done
""" % {"modules": " ".join(MODULES)}


class GuestUnavailable(Exception):
    """The guest cannot be built here; the message says why."""


class Guest(object):
    def __init__(self, directory):
        self.directory = directory
        self.kernel = os.path.join(directory, "vmlinuz")
        self.initrd = os.path.join(directory, "initrd.gz")

    def __repr__(self):
        return "<Guest %s>" % self.directory

    def kvm_hvparams(self, mode="idle"):
        """kvm hypervisor parameters booting this guest in ``mode``:
        direct kernel boot, software emulation (KVM acceleration does not
        work for Linux guests on every host), console at 115200 baud."""
        return {"kernel_path": self.kernel, "initrd_path": self.initrd,
                "root_path": "", "kvm_flag": "disabled",
                "serial_speed": 115200,
                "kernel_args": "quiet ganeti_test=%s" % mode}


def cache_dir():
    return (os.environ.get("GANETI_GUEST_CACHE")
            or os.environ.get("GANETI_TEST_CACHE")
            or os.path.join(os.path.expanduser("~"), ".cache",
                            "ganeti-twisted-tests"))


def qemu_binary():
    return shutil.which("qemu-system-x86_64")


def _run(cmd, cwd=None, timeout=300, **kw):
    try:
        return subprocess.run(cmd, cwd=cwd, check=True, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              **kw)
    except FileNotFoundError:
        raise GuestUnavailable("%s is not installed" % cmd[0])
    except subprocess.CalledProcessError as err:
        raise GuestUnavailable("%s failed: %s" % (
            " ".join(cmd), err.stderr.decode("utf-8", "replace").strip()[-500:]))
    except subprocess.TimeoutExpired:
        raise GuestUnavailable("%s took more than %ss" % (" ".join(cmd), timeout))


def _pick_kernel_package():
    out = _run(["apt-cache", "search", "--names-only",
                r"^linux-image-.*-cloud-amd64$"]).stdout.decode()
    names = [line.split()[0] for line in out.splitlines() if line.strip()]

    def abi(name):
        return tuple(int(x) for x in re.findall(r"\d+", name))
    # 6.1.0-N is what the project's machines were tried with; else newest
    exact = [n for n in names if re.match(r"^linux-image-6\.1\.0-\d+-cloud-amd64$", n)]
    versioned = [n for n in names if re.match(r"^linux-image-\d[\d.+a-z-]*-cloud-amd64$", n)
                 and "unsigned" not in n and "dbg" not in n]
    for candidates in (exact, versioned):
        if candidates:
            return max(candidates, key=abi)
    raise GuestUnavailable("apt-cache offers no linux-image-*-cloud-amd64")


def _extract(deb, dest):
    data = _run(["dpkg-deb", "--fsys-tarfile", deb]).stdout
    # extraction filters exist from Python 3.11.4 (and warn if unused in 3.12+)
    kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, **kwargs)


def _module_bytes(path):
    if path.endswith(".xz"):
        with lzma.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def _build(work):
    kernel_pkg = _pick_kernel_package()
    dl = os.path.join(work, "debs")
    os.makedirs(dl)
    _run(["apt-get", "download", "-o", "APT::Sandbox::User=root",
          kernel_pkg, "busybox-static"], cwd=dl)
    tree = os.path.join(work, "tree")
    for deb in glob.glob(os.path.join(dl, "*.deb")):
        _extract(deb, tree)
    vmlinuz = glob.glob(os.path.join(tree, "boot", "vmlinuz-*"))
    busybox = os.path.join(tree, "bin", "busybox")
    if not vmlinuz or not os.path.exists(busybox):
        raise GuestUnavailable("packages lack boot/vmlinuz-* or bin/busybox")
    root = os.path.join(work, "initramfs")
    for d in ("bin", "lib/modules", "proc", "sys", "dev"):
        os.makedirs(os.path.join(root, d))
    shutil.copy2(busybox, os.path.join(root, "bin", "busybox"))
    for name in MODULES:
        found = (glob.glob(os.path.join(tree, "lib/modules/*/kernel/**/%s.ko" % name),
                           recursive=True) +
                 glob.glob(os.path.join(tree, "lib/modules/*/kernel/**/%s.ko.xz" % name),
                           recursive=True))
        if not found:
            continue    # built in, or not in this kernel: /init skips it
        with open(os.path.join(root, "lib", "modules", name + ".ko"), "wb") as f:
            f.write(_module_bytes(found[0]))
    with open(os.path.join(root, "init"), "w") as f:
        f.write(INIT)
    os.chmod(os.path.join(root, "init"), 0o755)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for n in sorted(dirnames) + sorted(filenames):
            files.append(os.path.normpath(os.path.join(rel, n)))
    cpio = _run([busybox, "cpio", "-o", "-H", "newc"], cwd=root,
                input="\n".join(files).encode() + b"\n").stdout
    out = os.path.join(work, "guest")
    os.makedirs(out)
    with gzip.open(os.path.join(out, "initrd.gz"), "wb", compresslevel=1) as f:
        f.write(cpio)
    shutil.copy2(vmlinuz[0], os.path.join(out, "vmlinuz"))
    with open(os.path.join(out, "SOURCE"), "w") as f:
        f.write("%s busybox-static recipe %d\n" % (kernel_pkg, RECIPE))
    return out


_cached = None


def get_guest():
    """The cached guest, built first if needed; raises GuestUnavailable."""
    global _cached
    if _cached is not None:
        return _cached
    base = cache_dir()
    final = os.path.join(base, "guest-r%d" % RECIPE)
    ready = os.path.join(final, "vmlinuz")
    try:
        os.makedirs(base, exist_ok=True)
        with open(os.path.join(base, "guest.lock"), "w") as lock:
            # several test runs may share the cache: one builds, others wait
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(ready):
                work = tempfile.mkdtemp(prefix="build-", dir=base)
                try:
                    os.rename(_build(work), final)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    except OSError as err:
        raise GuestUnavailable("cannot build the test guest in %s: %s" %
                               (base, err))
    _cached = Guest(final)
    return _cached


def main(argv=None):
    """``python -m ganeti.dev.tinyguest``: build (or find) the guest and
    print its kernel and initrd paths."""
    import sys
    try:
        guest = get_guest()
    except GuestUnavailable as err:
        print("cannot build the tiny guest: %s" % err, file=sys.stderr)
        return 1
    print("kernel_path=%s" % guest.kernel)
    print("initrd_path=%s" % guest.initrd)
    if qemu_binary() is None:
        print("note: qemu-system-x86_64 is not installed (apt-get install"
              " qemu-system-x86)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
