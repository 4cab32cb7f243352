"""Exception hierarchy.

Class names are part of the wire format: luxi and RAPI clients receive errors
encoded as ``[class_name, [args...]]`` and Ganeti's own clients re-raise them by
name, so the names below match Ganeti's.  The second argument of
OpPrereqError/OpExecError style errors is an error code from ``ECODE_*``.
"""

# Error codes (second argument of OpPrereqError and friends)
ECODE_RESOLVER = "resolver_error"
ECODE_NORES = "insufficient_resources"
ECODE_TEMP_NORES = "temp_insufficient_resources"
ECODE_INVAL = "wrong_input"
ECODE_STATE = "wrong_state"
ECODE_NOENT = "unknown_entity"
ECODE_EXISTS = "already_exists"
ECODE_NOTUNIQUE = "resource_not_unique"
ECODE_FAULT = "internal_error"
ECODE_ENVIRON = "environment_error"
ECODE_ALL = frozenset([
    ECODE_RESOLVER, ECODE_NORES, ECODE_TEMP_NORES, ECODE_INVAL, ECODE_STATE,
    ECODE_NOENT, ECODE_EXISTS, ECODE_NOTUNIQUE, ECODE_FAULT, ECODE_ENVIRON,
])


class GenericError(Exception):
    """Base of every error this project raises on purpose."""


class LockError(GenericError):
    """A lock could not be used: deleted, not owned, wrong level order."""


class LockDeletedError(LockError):
    """The lock was deleted while (or before) it was being acquired."""


class HypervisorError(GenericError):
    """A hypervisor operation failed."""


class ProgrammerError(GenericError):
    """Code used an API the wrong way; never caused by user input."""


class BlockDeviceError(GenericError):
    """A block device operation failed."""


class ConfigurationError(GenericError):
    """The configuration is unreadable, inconsistent or cannot be changed so."""


class ConfigVersionMismatch(ConfigurationError):
    """config.data has a version this code does not know."""


class ConfigVerifyError(ConfigurationError):
    """Verification found errors; ``args[1]`` is the list of messages."""


class ReservationError(GenericError):
    """A resource (port, MAC, IP, uid) could not be reserved."""


class RemoteError(GenericError):
    """A call to a remote daemon failed."""


class SignatureError(GenericError):
    """A signed message failed verification."""


class ParameterError(GenericError):
    """A parameter is wrong; ``args[0]`` names it."""


class OpPrereqError(GenericError):
    """A prerequisite of an operation does not hold; nothing was changed."""


class OpExecError(GenericError):
    """An operation failed while it was executing."""


class OpCodeUnknown(GenericError):
    """An opcode id that this master does not implement."""


class JobLost(GenericError):
    """A job that should exist is gone."""


class JobCanceled(GenericError):
    """The job was cancelled."""


class JobFileCorrupted(GenericError):
    """A job file on disk cannot be parsed."""


class ResolverError(GenericError):
    """A host name could not be resolved."""


class ParseError(GenericError):
    """Text input could not be parsed."""


class UnitParseError(ParseError):
    """A size or unit string could not be parsed."""


class TypeEnforcementError(GenericError):
    """A value has the wrong type for its field."""


class TagError(GenericError):
    """A tag is malformed or a tag operation is invalid."""


class CommandError(GenericError):
    """An external command failed."""


class StorageError(GenericError):
    """A storage unit operation failed."""


class JobQueueError(GenericError):
    """The job queue cannot do what was asked."""


class JobQueueDrainError(JobQueueError):
    """The job queue is drained; no new jobs accepted."""


class JobQueueFull(JobQueueError):
    """The job queue has too many jobs."""


class JobQueueLocked(JobQueueError):
    """Another process (another master daemon) holds the job queue."""


class ConfdMagicError(GenericError):
    """A confd datagram does not start with the expected magic."""


class ConfdClientError(GenericError):
    """The confd client was used wrongly."""


class UdpDataSizeError(GenericError):
    """A UDP datagram is too big."""


class LuxiError(GenericError):
    """The luxi protocol was violated."""


class QueryFilterParseError(ParseError):
    """A query filter is malformed."""


class X509CertError(GenericError):
    """A certificate is invalid or cannot be used."""


class ExportError(GenericError):
    """An instance export is missing, unreadable or cannot be written."""


def encode_exception(err):
    """Encode an exception as ``(class name, args)`` for the wire."""
    args = []
    for a in err.args:
        args.append(a if isinstance(a, (str, int, float, bool, type(None),
                                        list, dict)) else str(a))
    return (err.__class__.__name__, args)


def decode_exception(value):
    """Rebuild an exception encoded by :func:`encode_exception`, or None.

    Only names of GenericError subclasses defined here are rebuilt; anything
    else is not treated as an encoded error.
    """
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and isinstance(value[0], str) and isinstance(value[1], (list, tuple))):
        cls = globals().get(value[0])
        if isinstance(cls, type) and issubclass(cls, GenericError):
            return cls(*value[1])
    return None
