"""ERR: exceptions across the protocol.

ERR-01 (SHOULD, reading in clauses.json): data that cannot be exported raises BufferError;
another class is warn, SystemError fail. ERR-02 (MUST): from_dlpack lets the producer's
exceptions through unchanged. ERR-03 (MUST): no DLPack methods -> AttributeError.
"""
import pytest

import _capsule_support as S
from dlconform.verdicts import Unsupported


def _unexportable(target):
    """[(label, native tensor, export call, reproducer lines)] of tensors this target's producer
    cannot export: dtypes whose legacy export raises, read-only tensors exported legacy (where
    that raises), the adapter's own `unexportable()` hook, and ref's exportable=False tensors."""
    out = []
    for dtype in target.dtypes():
        x, values, mk = S.make(target, dtype, (2,))
        try:
            cap = x.__dlpack__()
        except Exception:  # noqa: BLE001
            out.append(("%s tensor" % dtype, x, lambda x=x: x.__dlpack__(), mk + ["x.__dlpack__()"]))
        else:
            del cap
    dtype = S.pick_dtypes(target)[0]
    x, values, mk = S.make(target, dtype, (2, 3))
    ro = target.readonly(x)
    if ro is not None:
        try:
            cap = ro.__dlpack__()
        except Exception:  # noqa: BLE001
            out.append(("read-only tensor, legacy export", ro, lambda: ro.__dlpack__(),
                        mk + [S.readonly_line(target), "ro.__dlpack__()  # expected BufferError"]))
        else:
            del cap
    hook = getattr(target, "unexportable", None)
    if callable(hook):
        u = hook()
        if u is not None:
            out.append(("the adapter's unexportable tensor", u, lambda: u.__dlpack__(),
                        ["# u = target.unexportable()", "u.__dlpack__()"]))
    if getattr(target, "library", None) == "dlconform._ref":
        u = S._ref().Tensor("float32", (2, 3), exportable=False)
        out.append(("ref tensor with exportable=False", u, lambda: u.__dlpack__(),
                    ["u = _ref.Tensor('float32', (2, 3), exportable=False)", "u.__dlpack__()  # expected BufferError"]))
    return out


@pytest.mark.clause("ERR-01")
@pytest.mark.role("producer")
def test_unexportable_raises_buffererror(target, check):
    """__dlpack__ of a tensor that cannot be exported raises BufferError."""
    cases = _unexportable(target)
    if not cases:
        raise Unsupported("found no tensor that %s cannot export through the adapter (every dtype exports, no "
                          "read-only tensors that fail)" % target.name)
    for label, x, call, lines in cases:
        S.repro_unless_failed(check, S.setup_lines(target) + lines)
        try:
            cap = call()
        except BufferError:
            check.that(True, "ERR-01")
        except SystemError as e:
            check.record("ERR-01", "fail", "%s: %s" % (label, S.describe_exc(e)))
        except Exception as e:  # noqa: BLE001
            check.warn("ERR-01", "%s: __dlpack__ raised %s; data that cannot be exported should raise BufferError"
                       % (label, S.describe_exc(e)))
        else:
            del cap
            check.record("ERR-01", "pass", "%s: exported on a second try" % label)


@pytest.mark.clause("ERR-01")
@pytest.mark.role("producer")
def test_bad_argument_not_buffererror(target, check):
    """A bad argument (max_version that is not a tuple of ints) is not an export failure: any
    error but BufferError (warn) or SystemError (fail)."""
    x, values, mk = S.make(target)
    check.repro(S.setup_lines(target) + mk + ["x.__dlpack__(max_version='1.0')  # expected TypeError or ValueError"])
    try:
        cap = x.__dlpack__(max_version="1.0")
    except SystemError as e:
        check.record("ERR-01", "fail", "max_version='1.0' raised %s" % S.describe_exc(e))
    except BufferError as e:
        check.warn("ERR-01", "max_version='1.0' (a bad argument) raised BufferError, which means 'cannot export "
                   "this data': %s" % e)
    except Exception:  # noqa: BLE001
        check.that(True, "ERR-01")
    else:
        del cap
        check.record("ERR-01", "pass", "max_version='1.0' was accepted")


def _consumer_lines(target, where, base):
    return S.setup_lines(target) + [
        "class Boom(%s): pass" % base,
        "class P:",
        "    def __dlpack_device__(self):",
        "        %s" % ("raise Boom('from __dlpack_device__')" if where == "__dlpack_device__" else "return (1, 0)"),
        "    def __dlpack__(self, **kw):",
        "        %s" % ("raise Boom('from __dlpack__')" if where == "__dlpack__" else "return _ref.Forge().capsule()"),
        "%s  # expected: Boom" % S.consumer_expr(target, "P()"),
    ]


@pytest.mark.clause("ERR-02")
@pytest.mark.role("consumer")
@pytest.mark.parametrize("where", ["__dlpack__", "__dlpack_device__"])
def test_producer_exception_propagates(target, check, where):
    """An exception raised by the producer's __dlpack__ or __dlpack_device__ reaches the caller of
    from_dlpack unchanged (same class, same object), for a plain Exception subclass and a
    BufferError subclass."""
    for cls in (S.ProducerError, S.ProducerBufferError):
        base = "Exception" if cls is S.ProducerError else "BufferError"
        S.repro_unless_failed(check, _consumer_lines(target, where, base))
        raised = cls("raised by the producer's %s" % where)
        p = S.RaisingProducer(raised, where, capsule_factory=lambda: S._ref().Forge(shape=(2,)).capsule())
        y, exc = S.try_import(target, p)
        if where not in p.events:
            if exc is not None:
                check.that(not isinstance(exc, SystemError), "ERR-02", "%s: %s" % (cls.__name__, S.describe_exc(exc)))
            check.record("ERR-02", "pass", "the consumer never calls %s (see API-04), so it has nothing to propagate"
                         % where)
            del y
            continue
        if exc is None:
            check.that(False, "ERR-02", "%s raised %s but from_dlpack returned %s" % (where, cls.__name__, type(y).__name__))
            del y
            continue
        check.that(exc is raised, "ERR-02", "%s raised %s; from_dlpack raised %s instead" % (
            where, cls.__name__, S.describe_exc(exc) if type(exc) is not cls else "another %s object" % cls.__name__))


@pytest.mark.clause("ERR-03")
@pytest.mark.role("consumer")
def test_missing_methods_attributeerror(target, check):
    """from_dlpack(obj) for an obj without __dlpack__ and __dlpack_device__ raises AttributeError.
    An obj with __dlpack_device__ only: AttributeError expected too (warn otherwise: the Raises
    text speaks of the methods, plural). Reading: the array API gives the exception types of a
    Raises section as a should (design_topics/exceptions.rst), so another ordinary exception is
    warn; a result or a SystemError is fail."""
    check.repro(S.setup_lines(target) + ["class NoDLPack: pass",
                                         "%s  # expected AttributeError" % S.consumer_expr(target, "NoDLPack()")])
    for obj in (S.NoDLPack(), object(), 3):
        y, exc = S.try_import(target, obj)
        verdict, message = S.missing_methods_verdict(obj, y, exc)
        check.record("ERR-03", verdict, message)
    y, exc = S.try_import(target, S.DeviceOnly())
    if exc is None:
        check.warn("ERR-03", "from_dlpack of an object with __dlpack_device__ but no __dlpack__ returned %s"
                   % type(y).__name__)
    elif isinstance(exc, SystemError):
        check.that(False, "ERR-03", "object without __dlpack__: %s" % S.describe_exc(exc))
    elif not isinstance(exc, AttributeError):
        check.warn("ERR-03", "object with __dlpack_device__ but no __dlpack__: from_dlpack raised %s, AttributeError "
                   "expected" % S.describe_exc(exc))
    else:
        check.that(True, "ERR-03")
