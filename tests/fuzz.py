"""Hostile input for the fuzz tests (tests/test_fuzz.py), generated with
hypothesis.

The daemons under test run on the trial reactor, which hypothesis's own
test runner cannot wait for; :func:`draw` therefore only generates the
cases (a bounded number, from a seed) and the tests send them one by one.

The default run uses a fixed seed, so the test suite gives the same
answer every time; ``FUZZ_SEED=random`` (or ``FUZZ_SEED=N``) explores
other inputs, and a failure names the seed that repeats it.
``FUZZ_CASES=N`` changes how many cases each test sends (default 200).
"""

import json
import os
import random

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from ganeti import opcodes

#: the seed of this run (printed with every failure)
SEED = os.environ.get("FUZZ_SEED") or "20261124"
SEED = (random.SystemRandom().randrange(1 << 32) if SEED == "random"
        else int(SEED))
#: cases per test (each test may scale it)
CASES = int(os.environ.get("FUZZ_CASES") or 200)


def draw(strategy, count, salt=0):
    """``count`` values of ``strategy`` (fewer if it has fewer)."""
    found = []

    @seed(SEED + salt)
    @settings(max_examples=count, database=None, deadline=None,
              phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        found.append(value)
    collect()
    return found


#: names an attacker tries: paths, options, shell, control characters
HOSTILE_NAMES = [
    "", ".", "..", "../../../tmp/x", "a/b.example.com", "x y", "-rf",
    "semi;colon", "$(reboot)", "`id`", "a|b", "*", "nul\x00byte",
    "new\nline", "tab\t", "\u00fcn\u00efcode", "\U0001f4a3", "a" * 300,
    "%2e%2e%2f", "<script>", "' OR 1=1 --", "{name}", "null", "-1",
    "1e400", "node1.example.com", "inst1.example.com", "default",
]

names = st.one_of(st.sampled_from(HOSTILE_NAMES), st.text(max_size=30))

#: parameter names of every opcode: bodies with known keys reach deeper
PARAM_NAMES = sorted({p.name for op_id in opcodes.ALL_OP_IDS
                      for p in opcodes.opcode_class(op_id).PARAMS}
                     | {"OP_ID", "__version__", "name", "os", "pnode",
                        "snode", "tags", "fields", "kind"})

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    names)

json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.one_of(st.sampled_from(PARAM_NAMES), names),
                        inner, max_size=6)),
    max_leaves=25)

#: objects shaped like request bodies: known parameter names first
bodies = st.dictionaries(
    st.one_of(st.sampled_from(PARAM_NAMES), names), json_values,
    max_size=8)

#: raw bytes no JSON encoder would send
RAW_BODIES = [
    b"", b"{", b"}", b"[", b"nul", b"\xff\xfe\xfd", b"\x00" * 16,
    b"[" * 100000, b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 5000 + b"1" + b"}" * 5000,
    b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity",
    b'{"beparams":{"memory":1e400}}', b'{"disks":[{"size":1e400}]}',
    b'{"beparams":{"memory":NaN}}', b'"' + b"x" * 100000 + b'"',
    b'{"__version__": 1, "name": "a/b", "disk_template": "diskless"}',
]

raw_bodies = st.one_of(st.sampled_from(RAW_BODIES), st.binary(max_size=64))


def encode(value):
    """JSON text of ``value``, with Python's Infinity and NaN tokens."""
    return json.dumps(value).encode("utf-8")
