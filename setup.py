from setuptools import setup, find_packages

setup(
    name="ganeti-twisted",
    version="0.1.0",
    description="A cluster manager for virtual machines in the Ganeti tradition, on Twisted",
    long_description=open("README.rst").read(),
    packages=find_packages(include=["ganeti", "ganeti.*"]) + ["twisted.plugins"],
    package_data={"twisted": ["plugins/ganeti_plugins.py"]},
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
        "automat",
    ],
    entry_points={
        "console_scripts": [
        ],
    },
)
