"""ERR: exceptions across the protocol.

ERR-01 (SHOULD, reading in clauses.json): data that cannot be exported raises BufferError;
another class is warn, SystemError fail. ERR-02 (MUST): from_dlpack lets the producer's
exceptions through unchanged. ERR-03 (MUST): no DLPack methods -> AttributeError.
"""
import pytest

from dlconform import kit
from support import attempts as tries
from support import dtypes as dty
from support import readings as rd
from support import tensors as tns
from support.marks import consumer, producer


def _unexportable(target):
    """[(label, export call)] of tensors this target's producer cannot export:
    dtypes whose legacy export raises, read-only tensors exported legacy (where that raises),
    and the adapter's own unexportable() tensor."""
    out = []
    for dtype in target.dtypes():
        try:
            x, values = tns.make(target, dtype, (2,))
        except kit.Unsupported:  # a tensor the library cannot make is none it fails to export
            continue
        if kit.attempt(x.__dlpack__)[1] is not None:
            out.append(("%s tensor" % dtype, x.__dlpack__))
    dtype = dty.pick(target)[0]
    x, values = tns.make(target, dtype, (2, 3))
    ro = target.readonly(x)
    if ro is not None and kit.attempt(ro.__dlpack__)[1] is not None:
        out.append(("read-only tensor, legacy export", ro.__dlpack__))
    unexportable = target.unexportable()
    if unexportable is not None:
        what, u = unexportable
        out.append((what, u.__dlpack__))
    return out


@producer("ERR-01")
def test_unexportable_raises_buffererror(target, check):
    """__dlpack__ of a tensor that cannot be exported raises BufferError."""
    cases = _unexportable(target)
    if not cases:
        raise kit.Unsupported("found no tensor that %s cannot export through the adapter (every dtype exports, no "
                              "read-only tensors that fail)" % target.name)
    for label, call in cases:
        try:
            cap = call()
        except BufferError:
            check.that(True, "ERR-01")
        except Exception as e:  # noqa: BLE001
            if check.unclean(e):
                check.record("ERR-01", "fail", "%s: %s" % (label, tries.describe_exc(e)))
            else:
                check.warn("ERR-01", "%s: __dlpack__ raised %s; data that cannot be exported should raise "
                           "BufferError" % (label, tries.describe_exc(e)))
        else:
            del cap
            check.record("ERR-01", "pass", "%s: exported on a second try" % label)


@producer("ERR-01", "VER-01", feeds="argument")
def test_bad_argument_not_buffererror(target, check):
    """A bad argument (max_version that is not a tuple of ints, VER-01) is not an export
    failure: any error but BufferError (warn) or SystemError (fail); accepting it warns."""
    x, values = tns.make(target)
    try:
        cap = x.__dlpack__(max_version="1.0")
    except BufferError as e:
        check.warn("ERR-01", "max_version='1.0' (a bad argument) raised BufferError, which means 'cannot export "
                   "this data': %s" % e)
    except Exception as e:  # noqa: BLE001
        check.refusal("ERR-01", e, "max_version='1.0'", verdict="fail")
    else:
        del cap
        check.accepted("VER-01", "max_version='1.0' was accepted; max_version is a (major, minor) tuple of ints")
        return
    check.record("VER-01", "pass")


@consumer("ERR-02")
@pytest.mark.parametrize("where", ["__dlpack__", "__dlpack_device__"])
def test_producer_exception_propagates(target, check, where):
    """An exception raised by the producer's __dlpack__ or __dlpack_device__ reaches the caller of
    from_dlpack unchanged (same class, same object), for a plain Exception subclass and a
    BufferError subclass."""
    tries.producer_error_propagates(check, target, where)


@consumer("ERR-03")
def test_missing_methods_attributeerror(target, check):
    """from_dlpack(obj) for an obj without __dlpack__ and __dlpack_device__ raises AttributeError.
    An obj with __dlpack_device__ only: AttributeError expected too (warn otherwise: the Raises
    text speaks of the methods, plural). Reading: the array API gives the exception types of a
    Raises section as a should (design_topics/exceptions.rst), so another ordinary exception is
    warn; a result or a SystemError is fail."""
    for obj in (rd.NoDLPack(), object(), 3):
        att = tries.Attempt(target, obj)
        verdict, message = rd.missing_methods_verdict(obj, att.result, att.exc)
        check.record("ERR-03", verdict, message)
    att = tries.Attempt(target, rd.DeviceOnly())
    exc = att.exc
    if exc is None:
        check.warn("ERR-03", "from_dlpack of an object with __dlpack_device__ but no __dlpack__ returned %s"
                   % type(att.result).__name__)
    elif check.unclean(exc):
        check.that(False, "ERR-03", "object without __dlpack__: %s" % tries.describe_exc(exc))
    elif not isinstance(exc, AttributeError):
        check.warn("ERR-03", "object with __dlpack_device__ but no __dlpack__: from_dlpack raised %s, AttributeError "
                   "expected" % tries.describe_exc(exc))
    else:
        check.that(True, "ERR-03")
