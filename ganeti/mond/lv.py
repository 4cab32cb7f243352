"""``lv``: the node's LVM logical volumes, one object per segment, with
Ganeti's field names (sizes in bytes).

``lvs`` runs as a child process (never blocking the daemon).  A node
without LVM (no ``lvs`` program) reports an empty list; ``lvs`` failing
otherwise gives ``{"error": ...}``.  ``instance`` is always null: the
node does not map volumes to instances here.
"""

from twisted.internet import defer
from zope.interface import implementer

from ganeti.backend import process
from ganeti.mond import base

#: (lvs column, report key, is a number)
COLUMNS = (
    ("lv_uuid", "uuid", False), ("lv_name", "name", False),
    ("lv_attr", "attr", False), ("lv_major", "major", True),
    ("lv_minor", "minor", True), ("lv_kernel_major", "kernel_major", True),
    ("lv_kernel_minor", "kernel_minor", True), ("lv_size", "size", True),
    ("seg_count", "seg_count", True), ("lv_tags", "tags", False),
    ("modules", "modules", False), ("vg_uuid", "vg_uuid", False),
    ("vg_name", "vg_name", False), ("segtype", "segtype", False),
    ("seg_start", "seg_start", True), ("seg_start_pe", "seg_start_pe", True),
    ("seg_size", "seg_size", True), ("seg_tags", "seg_tags", False),
    ("seg_pe_ranges", "seg_pe_ranges", False), ("devices", "devices", False),
)
SEPARATOR = ";"
LVS_ARGV = ["lvs", "--noheadings", "--units", "b", "--nosuffix",
            "--separator", SEPARATOR, "-o", ",".join(c for c, _, _ in COLUMNS)]
#: exit status of a program that could not be started (not installed)
_NOT_FOUND = 127


def _number(text):
    try:
        return int(float(text))
    except ValueError:
        return 0


def parse_lvs(text):
    volumes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cols = line.strip().split(SEPARATOR)
        if len(cols) != len(COLUMNS):
            raise ValueError("lvs printed %d columns, not %d: %r"
                             % (len(cols), len(COLUMNS), line))
        entry = {key: (_number(value) if numeric else value)
                 for (_, key, numeric), value in zip(COLUMNS, cols)}
        entry["instance"] = None
        volumes.append(entry)
    return volumes


@implementer(base.ICollector)
class LvCollector(base.CollectorBase):
    name = "lv"
    category = "storage"
    kind = base.KIND_PERFORMANCE
    sampled = True

    def __init__(self, runner, timeout=30.0):
        #: runner.run(argv, env=..., timeout=...) -> Deferred CommandResult
        self.runner = runner
        self.timeout = timeout

    async def _collect(self):
        result = await self.runner.run(
            LVS_ARGV, env={"LVM_SUPPRESS_FD_WARNINGS": "1"},
            timeout=self.timeout)
        if result.exit_code == _NOT_FOUND:
            return []
        if result.failed:
            return {"error": result.describe()}
        return parse_lvs(result.stdout.decode("utf-8", "replace"))

    def collect(self):
        return defer.Deferred.fromCoroutine(self._collect())


def default_runner(reactor):
    return process.CommandRunner(reactor)
