import os

from setuptools import setup, find_packages

# The twistd plugins live in the namespace package twisted.plugins (no
# __init__.py, so Twisted's own plugins stay visible).  Twisted finds them
# in <each sys.path entry>/twisted/plugins; an editable install must
# therefore put this directory on sys.path.  package_dir={"": "."} makes
# setuptools (>= 64) do that with a path entry in a .pth file: with an
# empty package_dir it installs an import hook instead, which Twisted's
# plugin search never sees.
HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_PACKAGES = (["twisted.plugins"]
                   if os.path.exists(os.path.join(HERE, "twisted", "plugins",
                                                  "ganeti_plugins.py"))
                   else [])

setup(
    name="ganeti-twisted",
    version="0.1.0",
    description="A cluster manager for virtual machines in the Ganeti tradition, on Twisted",
    long_description=open("README.rst").read(),
    # ganeti.dev (virtual cluster, demo, tiny guest) is for development only.
    packages=find_packages(include=["ganeti", "ganeti.*"],
                           exclude=["ganeti.dev", "ganeti.dev.*"])
    + PLUGIN_PACKAGES,
    package_dir={"": "."},
    # the RAPI daemon's web console (docs/web.rst)
    package_data={"ganeti.rapi": ["web/*", "web/*/*", "web/*/*/*"]},
    python_requires=">=3.9",
    install_requires=[
        "twisted[tls]>=23.8",
        "klein",
        "treq",
        "txdbus",
        "service-identity",
        "pyasn1",
        "zope.interface",
        "attrs",
        "cryptography",
        "prometheus_client",
    ],
    entry_points={
        "console_scripts": [
            "cluster-merge = ganeti.tools.cluster_merge:main",
            "ganeti-confd-client = ganeti.confd.cli:main",
            "gnt-cluster = ganeti.cli.gnt_cluster:main",
            "gnt-debug = ganeti.cli.gnt_debug:main",
            "gnt-instance = ganeti.cli.gnt_instance:main",
            "gnt-node = ganeti.cli.gnt_node:main",
            "gnt-group = ganeti.cli.gnt_group:main",
            "gnt-network = ganeti.cli.gnt_network:main",
            "gnt-backup = ganeti.cli.gnt_backup:main",
            "gnt-filter = ganeti.cli.gnt_filter:main",
            "gnt-job = ganeti.cli.gnt_job:main",
            "gnt-os = ganeti.cli.gnt_os:main",
            "gnt-storage = ganeti.cli.gnt_storage:main",
            "hbal = ganeti.htools.hbal:main",
            "hail = ganeti.htools.hail:main",
            "harep = ganeti.watcher.autorepair.harep:main",
            "hspace = ganeti.htools.hspace:main",
        ],
    },
)
