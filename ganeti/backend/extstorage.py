"""ExtStorage providers on this node (Ganeti's ExtStorage interface).

A provider is a directory, named after it, in one of the node's
ExtStorage search path directories (``<root>/srv/ganeti/extstorage``
first, then those the node daemon is given), holding executable scripts
``create``, ``remove``, ``grow``, ``attach``, ``detach``, ``setinfo`` and
``verify`` (``snapshot``, ``open`` and ``close`` may be there too; then
they must be executable), and ``parameters.list``: ``<name>
<description>`` per line, the parameters disks of the provider accept.

:func:`diagnose` reads every provider of every search path directory
(file work: the node daemon runs it in its thread pool); the scripts are
not run.
"""

import os
import re
import stat

__all__ = ["REQUIRED_SCRIPTS", "OPTIONAL_SCRIPTS", "PARAMETERS_FILE",
           "default_search_path", "check_provider", "diagnose"]

REQUIRED_SCRIPTS = ("create", "remove", "grow", "attach", "detach",
                    "setinfo", "verify")
OPTIONAL_SCRIPTS = ("snapshot", "open", "close")
PARAMETERS_FILE = "parameters.list"

_PARAM_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def default_search_path(root="/"):
    """Ganeti's ExtStorage search path, under ``root``."""
    return [os.path.join(root, "srv/ganeti/extstorage")]


class ProviderError(Exception):
    """Why a provider directory is not a valid provider."""


def _stat(path, what):
    try:
        return os.stat(path)
    except OSError as err:
        raise ProviderError("%s %s is missing (%s)"
                            % (what, path, err.strerror or err))


def _check_script(path, required):
    if not required and not os.path.lexists(path):
        return
    st = _stat(path, "script")
    if not stat.S_ISREG(st.st_mode):
        raise ProviderError("script %s is not a regular file" % path)
    if not st.st_mode & stat.S_IXUSR:
        raise ProviderError("script %s is not executable" % path)


def check_provider(path):
    """The parameters (``[[name, description], ...]``) of the provider in
    directory ``path``; ProviderError saying what is wrong."""
    for script in REQUIRED_SCRIPTS:
        _check_script(os.path.join(path, script), True)
    for script in OPTIONAL_SCRIPTS:
        _check_script(os.path.join(path, script), False)
    plist = os.path.join(path, PARAMETERS_FILE)
    st = _stat(plist, "parameters file")
    if not stat.S_ISREG(st.st_mode):
        raise ProviderError("parameters file %s is not a regular file"
                            % plist)
    try:
        with open(plist, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f]
    except OSError as err:
        raise ProviderError("cannot read %s: %s"
                            % (plist, err.strerror or err))
    parameters = []
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        name, _, doc = line.partition(" ")
        name = name.split("\t", 1)[0]
        if not _PARAM_RE.match(name):
            raise ProviderError("%s line %d: invalid parameter name %r"
                                % (plist, number, name))
        parameters.append([name, line[len(name):].strip()])
    return parameters


def diagnose(search_path):
    """Every provider directory of every search path directory, in path
    order then by name (a name found twice: the first one is the one
    used): ``{"name", "path", "valid", "status", "parameters"}``."""
    result = []
    for top in search_path:
        try:
            names = sorted(os.listdir(top))
        except OSError:
            continue        # a directory that does not exist: no provider
        for name in names:
            path = os.path.join(top, name)
            if not os.path.isdir(path):
                continue
            try:
                parameters = check_provider(path)
            except ProviderError as err:
                result.append({"name": name, "path": path, "valid": False,
                               "status": str(err), "parameters": []})
            else:
                result.append({"name": name, "path": path, "valid": True,
                               "status": "", "parameters": parameters})
    return result
