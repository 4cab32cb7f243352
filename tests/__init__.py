"""The tests.  Configuration stores created here check themselves after
every change: what they write equals a full serialisation and what they
keep verified equals a full verification (ConfigStore.self_check); daemons
the tests start inherit it through the environment.
``GANETI_CONFIG_SELF_CHECK=0`` turns it off."""

import os

os.environ.setdefault("GANETI_CONFIG_SELF_CHECK", "1")

from ganeti.config import ConfigStore  # noqa: E402

ConfigStore.self_check = os.environ["GANETI_CONFIG_SELF_CHECK"] not in ("",
                                                                       "0")
