"""Instance policies: what the specs of an instance may be.

A policy (the cluster's, overridden key by key by a node group's; see
:func:`ganeti.objects.fill_group_ipolicy`) bounds an instance's memory
(``maxmem``, and ``minmem`` on modify), vCPUs, disk count and sizes, NIC
count and spindle use between the ``min`` and ``max`` of one of its
``minmax`` pairs, and allows only its ``disk-templates``.  Ganeti's rules,
which the checks here follow:

* a value the caller does not know (None) is not checked;
* with several ``minmax`` pairs, the pair with the fewest violations is
  the one reported (the instance fits if any pair fits);
* a diskless instance (no disks) is allowed only if ``diskless`` is among
  the policy's templates; the disk count is checked only for instances with
  disks;
* each violation reads ``"<spec> value <v> is not in range [<min>, <max>]"``
  (disk sizes as ``disk-size/<index>``).

Where an operation finds violations it refuses with ``"Instance allocation
to group <group uuid> (<group name>) violates policy: ..."`` (growing a
disk: ``"Growing disk <n> violates policy: ..."``; moving to a node of
another group: ``"Instance does not meet target node group's (<uuid>)
instance policy: ..."``), unless told to ignore the policy, which turns the
refusal into a warning.
"""

from ganeti import constants
from ganeti import errors
from ganeti import objects

#: the specs checked against min/max, in the order they are reported
_CHECKED = (constants.ISPEC_MEM_SIZE, constants.ISPEC_CPU_COUNT,
            constants.ISPEC_NIC_COUNT, constants.ISPEC_SPINDLE_USE)


def _range_violation(name, value, minmax):
    """A message if ``value`` lies outside ``minmax``'s range, else None."""
    if value is None or value == constants.VALUE_AUTO:
        return None
    low = minmax[constants.ISPECS_MIN].get(name.split("/")[0], value)
    high = minmax[constants.ISPECS_MAX].get(name.split("/")[0], value)
    if low <= value <= high:
        return None
    return "%s value %s is not in range [%s, %s]" % (name, value, low, high)


def spec_violations(ipolicy, memory=None, vcpus=None, nic_count=None,
                    spindle_use=None, disk_sizes=None, disk_count=None,
                    disk_templates=None):
    """Every way the given specs break ``ipolicy`` (a filled policy).

    ``disk_sizes`` is the list of disk sizes (an unknown size is None);
    ``disk_count`` defaults to its length, and None (with no sizes) means
    the disks are not known at all: neither their count nor the diskless
    rule is checked.  ``disk_templates`` are the templates the instance's
    disks have (or would have); None: not checked.
    """
    if disk_count is None and disk_sizes is not None:
        disk_count = len(disk_sizes)
    allowed = list(ipolicy.get(constants.IPOLICY_DTS) or [])
    result = []
    checks = [(name, value) for name, value in zip(
        _CHECKED, (memory, vcpus, nic_count, spindle_use))]
    checks += [("%s/%d" % (constants.ISPEC_DISK_SIZE, idx), size)
               for idx, size in enumerate(disk_sizes or [])]
    if disk_count:
        checks.append((constants.ISPEC_DISK_COUNT, disk_count))
    elif disk_count == 0 and constants.DT_DISKLESS not in allowed:
        result.append("Disk template %s is not allowed (allowed templates:"
                      " %s)" % (constants.DT_DISKLESS,
                                ", ".join(sorted(allowed))))
    forbidden = sorted(set(disk_templates or []) - set(allowed))
    if forbidden:
        result.append("Disk template %s is not allowed (allowed templates:"
                      " %s)" % (", ".join(forbidden),
                                ", ".join(sorted(allowed))))
    best = None
    for minmax in ipolicy.get(constants.ISPECS_MINMAX) or []:
        found = [msg for msg in (_range_violation(name, value, minmax)
                                 for name, value in checks) if msg]
        if best is None or len(found) < len(best):
            best = found
    return result + (best or [])


def instance_spec(cfg, instance, disks=None, beparams=None, nics=None):
    """The specs of ``instance`` as a policy sees them (keyword arguments
    of :func:`spec_violations`); ``disks``, ``beparams`` (merged over the
    instance's filled ones) and ``nics`` stand for planned changes.

    Memory is ``maxmem``.  With exclusive storage on the primary node the
    spindle use is the sum of the disks' spindles (unknown if any disk
    lacks them), as in Ganeti.
    """
    be = objects.fill_beparams(cfg.cluster, instance)
    be.update(beparams or {})
    if disks is None:
        disks = cfg.instance_disks(instance)
    spindle_use = be.get(constants.BE_SPINDLE_USE)
    node = cfg.nodes.get(instance.primary_node)
    if node is not None:
        nd = objects.fill_ndparams(cfg.cluster,
                                   cfg.nodegroups.get(node.group), node)
        if nd.get(constants.ND_EXCLUSIVE_STORAGE):
            spindles = [d.spindles for d in disks]
            spindle_use = (None if any(s is None for s in spindles)
                           else sum(spindles))
    return {"memory": be.get(constants.BE_MAXMEM),
            "vcpus": be.get(constants.BE_VCPUS),
            "nic_count": len(instance.nics if nics is None else nics),
            "spindle_use": spindle_use,
            "disk_sizes": [d.size for d in disks],
            "disk_templates": sorted(set(d.dev_type for d in disks
                                         if d.dev_type))}


def declared_spec(cfg, instance, disks, template=None):
    """The specs a forthcoming instance declares: only what it was given is
    checked (memory and vCPUs and spindle use when its own beparams set
    them, its NICs and disks when it has some; with no disks, the diskless
    rule only when ``template`` says diskless)."""
    own = instance.beparams or {}
    be = objects.fill_beparams(cfg.cluster, instance)
    memory = None
    if constants.BE_MAXMEM in own or constants.BE_MINMEM in own:
        memory = be.get(constants.BE_MAXMEM)
    spec = {"memory": memory,
            "vcpus": (be.get(constants.BE_VCPUS)
                      if constants.BE_VCPUS in own else None),
            "spindle_use": (be.get(constants.BE_SPINDLE_USE)
                            if constants.BE_SPINDLE_USE in own else None),
            "nic_count": len(instance.nics) if instance.nics else None}
    if disks:
        spec["disk_sizes"] = [d.size for d in disks]
        spec["disk_templates"] = sorted(set(d.dev_type for d in disks
                                            if d.dev_type))
    elif template == constants.DT_DISKLESS:
        spec["disk_count"] = 0
    elif template:
        spec["disk_templates"] = [template]
    return spec


def group_policy(cfg, node_uuid):
    """(group or None, filled policy) of the node's group; without a node
    (a forthcoming instance not placed yet), the cluster's policy."""
    node = cfg.nodes.get(node_uuid) if node_uuid else None
    group = cfg.nodegroups.get(node.group) if node is not None else None
    return group, objects.fill_group_ipolicy(cfg.cluster, group)


def allocation_message(group, violations):
    """Ganeti's refusal of an instance placed in ``group``."""
    text = ", ".join(violations)
    if group is None:
        return "Instance allocation violates the cluster's policy: %s" % text
    return ("Instance allocation to group %s (%s) violates policy: %s"
            % (group.uuid, group.name, text))


def enforce(lu, msg, ignore):
    """Refuse with ``msg`` (ECODE_INVAL), or only warn when ``ignore``."""
    if ignore:
        lu.log_warning("%s (ignored: --ignore-ipolicy)", msg)
        return
    raise errors.OpPrereqError(msg, errors.ECODE_INVAL)


def check_allocation(lu, node_uuid, ignore, **spec):
    """Check specs (:func:`spec_violations`' arguments) against the policy
    of ``node_uuid``'s group; refuse or warn."""
    group, policy = group_policy(lu.cfg, node_uuid)
    violations = spec_violations(policy, **spec)
    if violations:
        enforce(lu, allocation_message(group, violations), ignore)
    return violations


def check_target_group(lu, instance, target_uuid, ignore):
    """Moving ``instance`` to node ``target_uuid``: if that node is in
    another group than the primary, the instance must meet that group's
    policy (Ganeti's rule for migrate, failover, move, replace-disks)."""
    cfg = lu.cfg
    target = cfg.get_node(target_uuid)
    primary = cfg.nodes.get(instance.primary_node)
    if primary is None or primary.group == target.group:
        return []
    policy = objects.fill_group_ipolicy(cfg.cluster,
                                        cfg.nodegroups.get(target.group))
    violations = spec_violations(policy, **instance_spec(cfg, instance))
    if violations:
        enforce(lu, "Instance does not meet target node group's (%s)"
                " instance policy: %s" % (target.group,
                                          ", ".join(violations)), ignore)
    return violations


def violating_instances(cfg, policy_of_group, instances=None):
    """Names of the instances (default: all real ones) whose group's policy,
    as ``policy_of_group(group)`` gives it, they break."""
    names = []
    for inst in (instances if instances is not None
                 else cfg.instances.values()):
        if inst.forthcoming:
            continue
        node = cfg.nodes.get(inst.primary_node)
        if node is None:
            continue
        policy = policy_of_group(cfg.nodegroups.get(node.group))
        if spec_violations(policy, **instance_spec(cfg, inst)):
            names.append(inst.display_name)
    return sorted(names)


# --- the policy's disk templates and the cluster's enabled ones ----------

def restrict_templates(ipolicy, enabled):
    """``ipolicy`` with its disk templates cut to ``enabled`` (in the order
    of ``enabled``, whose first is the cluster's default).  A policy without
    the key is returned as it is."""
    result = dict(ipolicy)
    if constants.IPOLICY_DTS in result:
        allowed = set(result[constants.IPOLICY_DTS] or [])
        result[constants.IPOLICY_DTS] = [t for t in enabled if t in allowed]
    return result


def check_templates_enabled(ipolicy, enabled, field="ipolicy"):
    """Refuse policy disk templates that are not enabled (Ganeti's rule:
    the policy's templates are a subset of the cluster's)."""
    allowed = (ipolicy or {}).get(constants.IPOLICY_DTS)
    if allowed is None:
        return
    missing = sorted(set(allowed) - set(enabled))
    if missing:
        raise errors.OpPrereqError(
            "%s: the following disk templates are allowed by the ipolicy,"
            " but not enabled on the cluster: %s"
            % (field, ", ".join(missing)), errors.ECODE_INVAL)


# --- validation of a policy an admin gives ---------------------------------

_KEYS = frozenset([constants.ISPECS_MINMAX, constants.ISPECS_STD,
                   constants.IPOLICY_DTS, constants.IPOLICY_VCPU_RATIO,
                   constants.IPOLICY_SPINDLE_RATIO])


def _check_ispec(spec, field, complete):
    if not isinstance(spec, dict):
        raise errors.OpPrereqError("%s: expected a dictionary of specs, got"
                                   " %r" % (field, spec), errors.ECODE_INVAL)
    unknown = sorted(set(spec) - constants.ISPECS_PARAMETERS)
    if unknown:
        raise errors.OpPrereqError(
            "%s: unknown spec%s %s (known: %s)"
            % (field, "s" if len(unknown) > 1 else "", ", ".join(unknown),
               ", ".join(sorted(constants.ISPECS_PARAMETERS))),
            errors.ECODE_INVAL)
    if complete:
        missing = sorted(constants.ISPECS_PARAMETERS - set(spec))
        if missing:
            raise errors.OpPrereqError("%s: missing spec%s %s"
                                       % (field, "s" if len(missing) > 1
                                          else "", ", ".join(missing)),
                                       errors.ECODE_INVAL)
    for key, value in sorted(spec.items()):
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 0:
            raise errors.OpPrereqError("%s/%s: expected a non-negative"
                                       " integer, got %r"
                                       % (field, key, value),
                                       errors.ECODE_INVAL)


def check_policy(ipolicy, field="ipolicy", group=False):
    """Refuse a malformed (custom, partial) policy: unknown keys, minmax
    pairs that are not complete ``{min, max}`` specs with min <= max,
    ratios that are not positive numbers, unknown disk templates; ``std``
    only for the cluster (``group`` False).  "default" values (reset to
    the cluster's) pass."""
    for key, value in sorted((ipolicy or {}).items()):
        where = "%s/%s" % (field, key)
        if key not in _KEYS:
            raise errors.OpPrereqError("%s: unknown key '%s'" % (field, key),
                                       errors.ECODE_INVAL)
        if value == constants.VALUE_DEFAULT:
            continue
        if key == constants.ISPECS_STD:
            if group:
                raise errors.OpPrereqError(
                    "%s: std (the standard instance specs) can only be set"
                    " for the cluster" % field, errors.ECODE_INVAL)
            _check_ispec(value, where, complete=False)
        elif key == constants.ISPECS_MINMAX:
            if not isinstance(value, list) or not value:
                raise errors.OpPrereqError(
                    "%s: expected a non-empty list of {min, max} specs, got"
                    " %r" % (where, value), errors.ECODE_INVAL)
            for idx, pair in enumerate(value):
                here = "%s/%d" % (where, idx)
                if not isinstance(pair, dict) or \
                        set(pair) != {constants.ISPECS_MIN,
                                      constants.ISPECS_MAX}:
                    raise errors.OpPrereqError(
                        "%s: expected exactly the keys min and max, got %r"
                        % (here, pair), errors.ECODE_INVAL)
                for bound in (constants.ISPECS_MIN, constants.ISPECS_MAX):
                    _check_ispec(pair[bound], "%s/%s" % (here, bound),
                                 complete=True)
                for spec in sorted(constants.ISPECS_PARAMETERS):
                    low = pair[constants.ISPECS_MIN][spec]
                    high = pair[constants.ISPECS_MAX][spec]
                    if low > high:
                        raise errors.OpPrereqError(
                            "%s/%s: min %s is greater than max %s"
                            % (here, spec, low, high), errors.ECODE_INVAL)
        elif key in (constants.IPOLICY_VCPU_RATIO,
                     constants.IPOLICY_SPINDLE_RATIO):
            if isinstance(value, bool) or \
                    not isinstance(value, (int, float)) or value <= 0:
                raise errors.OpPrereqError("%s: expected a positive number,"
                                           " got %r" % (where, value),
                                           errors.ECODE_INVAL)
        elif key == constants.IPOLICY_DTS:
            bad = [t for t in (value if isinstance(value, list) else [])
                   if t not in constants.DISK_TEMPLATES]
            if not isinstance(value, list) or bad:
                raise errors.OpPrereqError(
                    "%s: expected a list of disk templates, got %r"
                    % (where, value), errors.ECODE_INVAL)


def update_policy(current, changes):
    """``current`` (a custom policy) with ``changes`` applied: a key given
    replaces the old value (``std`` is merged spec by spec), "default"
    removes it."""
    result = dict(current or {})
    for key, value in (changes or {}).items():
        if value == constants.VALUE_DEFAULT:
            result.pop(key, None)
        elif key == constants.ISPECS_STD:
            merged = dict(result.get(key) or {})
            merged.update(value)
            result[key] = merged
        else:
            result[key] = value
    return result
