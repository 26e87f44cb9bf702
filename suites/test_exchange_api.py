"""XAPI-01..19: the C exchange API (`__dlpack_c_exchange_api__`, dlpack.h v1.3).

Producer side: discovery on the type, the capsule, the superseded int form, the static
table, the prev_api chain, the NULL rules, and each function's contract (allocator with a
real SetError, managed/dltensor export, import that steals, current_work_stream on CPU,
agreement with __dlpack__, hostile input in child processes). Consumer side: forged tables
(`_ref.ApiForge` through support/xapi_forge.py) show whether the consumer looks on the
type, checks the major and copes with a NULL dltensor_from. XAPI-20 is informative.

Readings (clauses.json): the table's `minor` may differ (XAPI-06); a wrong-type object to
managed_tensor_from_py_object_no_sync breaks the *caller's* precondition in the header, so
anything but a clean error there is warn (XAPI-14); BufferError is a SHOULD (XAPI-14).
"""
import ctypes

from dlconform import _ref, kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import exchange as xa
from support import repros as rp
from support import tensors as tns
from support import xapi_forge as xf
from support.marks import consumer, producer


# ============================================================================ discovery
@producer("XAPI-01")
def test_table_is_a_class_attribute(target, check):
    """The table is found on type(x), and every instance sees that same object."""
    x, _ = xa.sample(target)
    on_type = getattr(type(x), xa.ATTR, None)
    on_inst = getattr(x, xa.ATTR, None)
    if on_type is None and on_inst is None:
        raise kit.Unsupported("%s has no %s%s" % (target.name, xa.ATTR,
                                                  " (only the superseded v1.2 %s, see XAPI-03)" % xa.ATTR_V12
                                                  if getattr(type(x), xa.ATTR_V12, None) is not None else ""))
    if on_type is None:
        check.that(False, "XAPI-01", "%s is set on the instance only, not on %s" % (xa.ATTR, type(x).__name__))
        return
    in_dict = any(xa.ATTR in k.__dict__ for k in type(x).__mro__)
    check.that(in_dict, "XAPI-01", "%s is not in the class dict of %s or its bases" % (xa.ATTR, type(x).__name__))
    if pycap.is_capsule(on_inst) and not pycap.is_capsule(on_type):
        check.that(False, "XAPI-01", "the type gives a %s, only instances give the capsule: the table is not a "
                   "static class attribute" % type(on_type).__name__)
    else:
        check.that(on_inst is on_type, "XAPI-01", "instances see another object (%s) than the type (%s)"
                   % (type(on_inst).__name__, type(on_type).__name__))


@producer("XAPI-02")
def test_capsule_name(target, check):
    """The attribute is a PyCapsule named exactly "dlpack_exchange_api" with a table pointer."""
    x, _ = xa.sample(target)
    value = getattr(type(x), xa.ATTR, None)
    if value is None:
        raise kit.Unsupported("%s has no %s on its type" % (target.name, xa.ATTR))
    if not pycap.is_capsule(value):
        check.that(False, "XAPI-02", "%s is a %s, not a PyCapsule" % (xa.ATTR, type(value).__name__))
        return
    info = kit.exchange_api(type(x))
    check.equal(info["capsule_name"], xa.CAPSULE_NAME, "XAPI-02", "capsule name")
    if info["form"] == "capsule":
        check.that(info["pointer"] != 0, "XAPI-02", "the capsule's pointer is NULL")


@producer("XAPI-03")
def test_superseded_int_form(target, check):
    """Only the v1.2 int `__c_dlpack_exchange_api__` is superseded by the v1.3 capsule: warn."""
    x, _ = xa.sample(target)
    v13 = getattr(type(x), xa.ATTR, None)
    v12 = getattr(type(x), xa.ATTR_V12, None)
    if v13 is None and v12 is None:
        raise kit.Unsupported("%s offers no exchange API in either form" % target.name)
    if v13 is None:
        check.warn("XAPI-03", "only the superseded v1.2 int %s is offered; v1.3 names it %s, a capsule "
                   "(reading in clauses.json)" % (xa.ATTR_V12, xa.ATTR))
        return
    if v12 is not None and pycap.is_capsule(v13) and isinstance(v12, int):
        p13 = kit.exchange_api(type(x))["pointer"]
        check.that(v12 == p13, "XAPI-03", "the v1.2 int (0x%x) and the v1.3 capsule (0x%x) name different tables"
                   % (v12, p13))
    else:
        check.record("XAPI-03", "pass", "" if v12 is None else "both forms offered")


@producer("XAPI-05")
def test_table_is_static(target, check):
    """Repeated lookups give the same table pointer, also after tensors died (static table)."""
    x, _ = xa.sample(target)
    if getattr(type(x), xa.ATTR, None) is None:
        raise kit.Unsupported("%s has no %s on its type" % (target.name, xa.ATTR))
    t1, t2 = xa.Table(x), xa.Table(x)  # each holds its own attribute value
    if not (t1.info and t1.info["form"] == "capsule"):
        raise kit.Unsupported("the attribute is not a dlpack_exchange_api capsule (XAPI-02)")
    check.equal(t2.ptr, t1.ptr, "XAPI-05", "two lookups held at once give different tables")
    y = xa.sample(target, shape=(4,))[0]
    del x, y
    tries.settle()
    t3 = xa.Table(xa.sample(target, shape=(1,))[0])
    check.equal(t3.ptr, t1.ptr, "XAPI-05", "the table pointer after the first tensors died")


@producer("XAPI-06")
def test_table_header_major(target, check):
    """The table's header.version has major 1, the major of the struct this DLPack defines (any
    minor): every consumer must refuse a table of another major before using it (XAPI-06), so
    such a table is one no consumer can use, the producer's finding."""
    x, _ = xa.sample(target)
    t = xa.Table(x)
    if not (t.info and t.info.get("version")):
        raise kit.Unsupported("%s offers no exchange API table whose header can be read (XAPI-01, XAPI-02)"
                              % target.name)
    major, minor = t.info["version"]
    check.equal(major, 1, "XAPI-06", "header.version is (%d, %d): the major of a table every consumer of DLPack 1.x "
                "may use" % (major, minor))


def walk_prev_api(target, check):
    """Follows header.prev_api of the table: each header strictly older than the last, NULL
    within 9 (an unknown pointer may crash: run in a child process)."""
    x, t = xa.table(target)
    p, last = t.info["prev_api"], tuple(t.info["version"])
    for _ in range(9):
        if not p:
            return
        v = (ctypes.c_uint32.from_address(p).value, ctypes.c_uint32.from_address(p + 4).value)
        if not check.that(v < last, "XAPI-07", "prev_api leads to the header %r, not older than %r" % (v, last)):
            return
        last, p = v, ctypes.c_void_p.from_address(p + 8).value
    check.that(False, "XAPI-07", "prev_api is a chain of more than 9 headers")


@producer("XAPI-07")
def test_prev_api_chain(target, check):
    """header.prev_api is NULL, or a chain of strictly older headers that ends in NULL."""
    x, t = xa.table(target)
    prev = t.info["prev_api"]
    if not prev:
        check.record("XAPI-07", "pass")
        return
    run = rp.run_case(check, target, walk_prev_api)
    check.that(run.rc == 0 and not run.findings, "XAPI-07", "prev_api 0x%x is not a chain of older headers ending "
               "in NULL: %s" % (prev, "; ".join(m for _, m in run.findings) or run.describe()))


# ============================================================================ NULL rules


@producer("XAPI-08", "XAPI-09", "XAPI-10", "XAPI-12")
def test_required_pointers(target, check):
    """The allocator, both managed conversions and current_work_stream are non-NULL."""
    x, t = xa.table(target)
    for clause, name in (("XAPI-08", "managed_tensor_allocator"), ("XAPI-09", "managed_tensor_from_py_object_no_sync"),
                         ("XAPI-10", "managed_tensor_to_py_object_no_sync"), ("XAPI-12", "current_work_stream")):
        check.that(t.info["functions"][name] != 0, clause, "%s is NULL" % name)


# ============================================================================ allocator
@producer("XAPI-13")
def test_allocator_success(target, check):
    """Every dtype the target makes, including zero-size and 0-d: an owning versioned tensor of
    that dtype, shape and device, and SetError not called."""
    x, t = xa.table_with(target, "managed_tensor_allocator", "XAPI-08")
    failed = []
    for name in target.dtypes():
        dt = kit.DTYPES.get(name)
        if dt is None:
            continue
        for shape in ((2, 3), (0,), (3, 0, 2), ()):
            rc, h, errors = kit.xapi_alloc(t.ptr, dt, shape, (1, 0))
            if rc != 0:
                check.that(len(errors) == 1, "XAPI-13", "%s %r: the allocator failed (rc %d) and called SetError "
                           "%d times: %r" % (name, shape, rc, len(errors), errors))
                failed.append("%s%r" % (name, shape))
                continue
            check.that(not errors, "XAPI-13", "%s %r: success, yet SetError was called: %r" % (name, shape, errors))
            if not check.that(h is not None, "XAPI-13", "%s %r: rc 0 but no tensor in out" % (name, shape)):
                continue
            info = h.inspect()
            got = (info.get("version") and info["version"][0], tuple(info.get("dtype") or ()),
                   tuple(info.get("shape") or ()), tuple(info.get("device") or ()))
            check.equal(got, (1, dt, tuple(shape), (1, 0)), "XAPI-13",
                        "%s %r: (version major, dtype, shape, device) of the allocated tensor" % (name, shape))
            if 0 not in shape:
                ext = h.extent()
                check.that(ext["status"] == "ok" and info["data"], "XAPI-13",
                           "%s %r: the allocated tensor has no valid memory (extent %s, data %r)"
                           % (name, shape, ext["status"], info["data"]))
            h.release()
    if failed:  # a clean failure is allowed: the allocator need not support every dtype
        check.record("XAPI-13", "pass", "the allocator refused (cleanly) %s" % ", ".join(failed[:8]))


_BAD_PROTOTYPES = (
    ("unknown dtype code 250", (250, 32, 1), (2,), (1, 0), True),
    ("float with 7 bits", (2, 7, 1), (2,), (1, 0), True),
    ("negative extent", (2, 32, 1), (-1, 3), (1, 0), True),
    ("a device type no library has (kDLHexagon 16)", (2, 32, 1), (2,), (16, 0), False),
    ("kDLCUDA 0 (judged only when it fails)", (2, 32, 1), (2,), (2, 0), False),
)


@producer("XAPI-13")
def test_allocator_failure_calls_seterror_once(target, check):
    """A failing allocator returns non-zero and calls the (real) SetError: once expected, never
    zero times; success with invalid input is warn."""
    x, t = xa.table_with(target, "managed_tensor_allocator", "XAPI-08")
    for label, dt, shape, dev, must_fail in _BAD_PROTOTYPES:
        rc, h, errors = kit.xapi_alloc(t.ptr, dt, shape, dev)
        calls = [e for e in errors if e[0] != "<python exception pending>"]
        if rc == 0:
            check.that(not calls, "XAPI-13", "%s: success, yet SetError was called: %r" % (label, calls))
            if h is not None:
                h.release()
            if must_fail:
                check.warn("XAPI-13", "%s: the allocator succeeded on an invalid prototype" % label)
        elif not calls:
            check.that(False, "XAPI-13", "%s: the allocator failed (rc %d) without calling SetError%s"
                       % (label, rc, " (it set a Python exception instead: %s)" % errors[-1][1] if errors else ""))
        elif len(calls) > 1:
            check.warn("XAPI-13", "%s: SetError called %d times for one failure (the header says it is called "
                       "exactly when the allocator fails; reading: once): %r" % (label, len(calls), calls))
        else:
            check.that(h is None, "XAPI-13", "%s: failed, yet a tensor came back" % label)


# ============================================================================ managed_tensor_from_py_object_no_sync
def _layouts(target):
    """[(label, x)] of a few layouts, views where the adapter offers them."""
    dtype = dty.pick(target)[0]
    out = [("%s %r" % (dtype, shape), tns.make(target, dtype, shape)[0]) for shape in ((2, 3), (), (0, 3), (5,))]
    return out + tns.views(target, tns.make(target, dtype, (3, 4))[0], (("transposed (3, 4)", ("transpose", (1, 0))),
                                                                       ("sliced [:, 1:4:2]", ("slice", 1, 1, 4, 2))))


@producer("XAPI-14")
def test_managed_from_owning_versioned(target, check):
    """An owning versioned tensor: version (1, x), only defined flags, the tensor's values, and
    a deleter that releases it while the producer's tensor stays intact; the C path agrees
    with __dlpack__ on data, shape, strides, dtype and flags."""
    x0, t = xa.table_with(target, "managed_tensor_from_py_object_no_sync", "XAPI-09")
    for label, x in _layouts(target):
        expected = target.expected(x)
        rc, h, exc = kit.xapi_managed_from(t.ptr, x)
        if not check.that(rc == 0 and h is not None, "XAPI-14", "%s: rc %d, exception %r" % (label, rc, exc)):
            continue
        info = h.inspect()
        check.equal(info["version"] and info["version"][0], 1, "XAPI-14", "%s: version major" % label)
        check.that(not (info["flags"] or 0) & ~pycap.DEFINED_FLAGS, "XAPI-14", "%s: undefined flag bits 0x%x"
                   % (label, info["flags"] or 0))
        check.equal(h.read_elements(), expected, "XAPI-14", "%s: values through the C path" % label)
        try:
            cap = x.__dlpack__(max_version=(1, 3))
            ref_info = pycap.fields(cap)
        except Exception as e:  # noqa: BLE001
            ref_info = None
            check.record("XAPI-14", "pass", "%s: __dlpack__ raised %s; no agreement check" % (label, type(e).__name__))
        if ref_info and ref_info["kind"] == "versioned":
            for field in ("dtype", "shape", "device"):
                check.equal(tuple(info[field] or ()), tuple(ref_info[field] or ()), "XAPI-14",
                            "%s: %s of the C path vs __dlpack__" % (label, field))
            check.equal(xa.norm_strides(info), xa.norm_strides(ref_info), "XAPI-14",
                        "%s: strides (dims of extent > 1) of the C path vs __dlpack__" % label)
            check.equal((info["flags"] or 0) & 1, (ref_info["flags"] or 0) & 1, "XAPI-14",
                        "%s: READ_ONLY of the C path vs __dlpack__" % label)
            if 0 not in (info["shape"] or ()) and pycap.address(info) != pycap.address(ref_info):
                check.warn("XAPI-14", "%s: the C path and __dlpack__ give different memory (0x%x vs 0x%x)"
                           % (label, pycap.address(info) or 0, pycap.address(ref_info) or 0))
            del cap
        h.release()
        check.equal(target.expected(x), expected, "XAPI-14", "%s: the tensor's values after the deleter ran" % label)


#: objects of other types than the producer's, by label
WRONG_OBJECTS = {"object()": object, "the int 42": lambda: 42, "a str": lambda: "not a tensor",
                 "a bytearray": lambda: bytearray(64), "a dlconform._ref.Tensor": lambda: _ref.Tensor("float32", (2,))}


def managed_from_wrong_object(target, check, label):
    """managed_tensor_from_py_object_no_sync of WRONG_OBJECTS[label]: an error with an exception
    (it may crash the process: run in a child)."""
    x, t = xa.table(target)
    rc, h, exc = kit.xapi_managed_from(t.ptr, WRONG_OBJECTS[label]())
    check.that(rc != 0 and exc is not None, "XAPI-14", "%s: rc %s, tensor %s, exception %s: expected an error with "
               "an exception" % (label, rc, h is not None, type(exc).__name__ if exc is not None else None))


@producer("XAPI-14")
def test_managed_from_wrong_type(target, check):
    """An object of another type gives an error, not a crash. The header makes the type the
    caller's precondition, so anything else is warn. Each call runs in a child process."""
    x, t = xa.table_with(target, "managed_tensor_from_py_object_no_sync", "XAPI-09")
    check.record("XAPI-14", "pass")
    for label in [k for k in WRONG_OBJECTS if k != "a dlconform._ref.Tensor" or not isinstance(x, _ref.Tensor)]:
        run = rp.run_case(check, target, managed_from_wrong_object, {"label": label})
        if run.findings:
            check.warn("XAPI-14", run.findings[0][1])
        elif run.rc != 0:
            check.warn("XAPI-14", "%s: the process died (%s); the header requires the object to be of the API's "
                       "type, so this is robustness, not a breach" % (label, run.describe()))


@producer("XAPI-14")
def test_managed_from_undescribable_raises_buffererror(target, check):
    """Where __dlpack__ cannot describe a tensor (BufferError), a failing C export sets an
    exception, which should be BufferError (SHOULD: warn otherwise)."""
    x0, t = xa.table(target)
    unexportable = target.unexportable()
    if unexportable is None:
        raise kit.Unsupported("no tensor %s cannot describe is known to the adapter" % target.name)
    label, x = unexportable
    rc, h, exc = kit.xapi_managed_from(t.ptr, x)
    if rc == 0:
        if h is not None:
            h.release()
    elif check.that(exc is not None, "XAPI-14", "%s: failed (rc %d) without a Python exception"
                    % (label, rc)) and not isinstance(exc, BufferError):
        check.warn("XAPI-14", "%s: %s instead of BufferError (the header: 'should be a BufferError if "
                   "possible')" % (label, type(exc).__name__))


# ============================================================================ dltensor_from
@producer("XAPI-15")
def test_dltensor_from_matches_managed_path(target, check):
    """The non-owning fill describes the producer's own memory exactly as the owning export."""
    x0, t = xa.table_with(target, "dltensor_from_py_object_no_sync", "which XAPI-11 allows")
    for label, x in _layouts(target):
        rc, d = kit.xapi_dltensor_from(t.ptr, x)  # d: the description, or the exception when rc != 0
        if not check.that(rc == 0, "XAPI-15", "%s: rc %d, exception %r" % (label, rc, d)):
            continue
        check.equal(d["elements"], target.expected(x), "XAPI-15", "%s: values" % label)
        rc, h, exc = kit.xapi_managed_from(t.ptr, x)
        if rc != 0 or h is None:
            continue
        m = h.inspect()
        if m.get("readable", True):  # else another major version: VER-07/VER-08 judge it; no fields
            for field in ("dtype", "shape", "device"):
                check.equal(tuple(d[field] or ()), tuple(m[field] or ()), "XAPI-15",
                            "%s: %s vs managed_tensor_from_py_object_no_sync" % (label, field))
            check.equal(xa.norm_strides(d), xa.norm_strides(m), "XAPI-15", "%s: strides vs the managed path" % label)
            if 0 not in (d["shape"] or ()):
                check.equal(pycap.address(d), pycap.address(m), "XAPI-15",
                            "%s: data + byte_offset must be the producer's memory, as in the owning export" % label)
        h.release()


# ============================================================================ current_work_stream
_UNSET = 0x5E7F00D


@producer("XAPI-16")
def test_current_work_stream_cpu(target, check):
    """For kDLCPU: returns 0 and writes NULL (the header's CPU answer)."""
    x, t = xa.table_with(target, "current_work_stream", "XAPI-12")
    fn = t.info["functions"]["current_work_stream"]
    # called here, not through kit.xapi_current_stream: the check tells an unwritten output apart
    f = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))(fn)
    out = ctypes.c_void_p(_UNSET)
    rc, exc = kit.attempt(lambda: f(1, 0, ctypes.byref(out)))  # PYFUNCTYPE raises a pending exception
    if rc != 0:
        if exc is None:
            check.that(False, "XAPI-16", "kDLCPU: rc %d without a Python exception" % rc)
        else:
            check.warn("XAPI-16", "kDLCPU: failed with %s: %s (the header's CPU answer is 0 and NULL)"
                       % (type(exc).__name__, exc))
        return
    if out.value == _UNSET:
        check.warn("XAPI-16", "kDLCPU: returned 0 without writing out_current_stream (the header: a CPU "
                   "implementation 'always set[s] out_current_stream[0] to NULL')")
    elif out.value:
        check.warn("XAPI-16", "kDLCPU: wrote the non-NULL stream 0x%x (the header: the producer can simply "
                   "return NULL for kDLCPU)" % out.value)
    else:
        check.record("XAPI-16", "pass")


# ============================================================================ managed_tensor_to_py_object_no_sync
@producer("XAPI-17")
def test_to_py_steals_and_returns_producer_type(target, check):
    """The import steals the tensor (its deleter runs once, when the result dies, not before)
    and gives an object of the producer's type with the same values and metadata. Sources:
    the producer's own versioned export, and a foreign tensor from kit.Forge."""
    x, t = xa.table_with(target, "managed_tensor_to_py_object_no_sync", "XAPI-10")  # x: a (2, 3) tensor
    dtype = dty.pick(target)[0]
    cap, e = kit.attempt(lambda: x.__dlpack__(max_version=(1, 3)))
    sources = [("its own export", cap, target.expected(x), None)] if e is None else []
    if dtype == "float32":
        forge = kit.Forge(dtype=(2, 32, 1), shape=(2, 3))
        sources.append(("a kit.Forge float32 (2, 3)", forge.capsule(), forge.expected_elements(), forge))
    for label, cap, expected, forge in sources:
        if kit.inspect(cap)["kind"] != "versioned":
            continue
        tr = kit.instrument(cap)
        h = kit.consume(cap)
        rc, y = kit.xapi_to_py(t.ptr, h)
        if not check.that(rc == 0 and y is not None, "XAPI-17", "%s: rc %d, %r" % (label, rc, y)):
            continue
        check.that(isinstance(y, type(x)), "XAPI-17", "%s: returned a %s, not the producer's %s"
                   % (label, type(y).__name__, type(x).__name__))
        check.equal(tr.calls, 0, "XAPI-17", "%s: deleter calls while the result lives" % label)
        try:
            got = kit.read_elements(y.__dlpack__(max_version=(1, 3)))
        except Exception as e:  # noqa: BLE001
            got = "export failed: %r" % e
        check.equal(got, expected, "XAPI-17", "%s: values of the result" % label)
        del y
        tries.settle()
        check.equal(tr.calls, 1, "XAPI-17", "%s: deleter calls after the result died (it was stolen)" % label)


# ============================================================================ hostile input
#: (label, call, in_contract); a call is ("alloc", dtype, shape, device), ("stream", device) or
#: ("to_py", forge keywords). In-contract values are well-formed arguments the producer may not
#: support: any crash there is a breach. A malformed tensor breaks the caller's side, so only an
#: escaped C++ exception is judged there.
HOSTILE = ([("allocator, " + label, ("alloc", dt, shape, dev), True) for label, dt, shape, dev, _ in _BAD_PROTOTYPES + (
    ("a shape whose size overflows", (2, 32, 1), (2 ** 62, 4), (1, 0), True),
    ("kDLCUDA device -1", (2, 32, 1), (2,), (2, -1), False),
    ("lanes 0", (2, 32, 0), (2,), (1, 0), True))]
    + [("current_work_stream%r" % (dev,), ("stream", dev), True)
       for dev in ((2, 0), (2, -1), (10, 0), (999, 0), (1, -1), (1, 7))]
    + [("to_py_object, " + label, ("to_py", kw), ok) for label, kw, ok in (
        ("unknown dtype (250, 32, 1)", {"dtype": (250, 32, 1)}, True),
        ("kDLCUDA device with a host pointer", {"device": (2, 0)}, True),
        ("0-d with NULL shape", {"shape": (), "shape_null": True}, True),
        ("negative extent", {"shape": (-2, 3)}, False))])


def _hostile_call(api, kind, *args):
    if kind == "alloc":
        rc, h, errors = kit.xapi_alloc(api, *args)
        if h is not None:
            h.release()
    elif kind == "stream":
        kit.xapi_current_stream(api, *args[0])
    else:
        kit.xapi_to_py(api, kit.consume(kit.Forge(**args[0]).capsule()))


def hostile_calls(target, check, first=0, last=None):
    """The calls HOSTILE[first:last], each between the lines 'BEGIN n' and 'END n' (a child
    process runs them: the parent tells which call killed it). A refusal or a Python error
    (a NULL function: XAPI-08..12 judge that) is no crash."""
    x, t = xa.table(target)
    for n in range(first, len(HOSTILE) if last is None else last):
        print("BEGIN %d" % n, flush=True)
        kit.attempt(lambda: _hostile_call(t.ptr, *HOSTILE[n][1]))
        print("END %d" % n, flush=True)


@producer("XAPI-18")
def test_hostile_arguments_do_not_crash(target, check):
    """The calls run in child processes, one after another (a new child after a death): a
    producer must fail cleanly, never abort (an escaped C++ exception reaches std::terminate)
    or crash on well-formed arguments."""
    x, t = xa.table(target)
    check.record("XAPI-18", "pass")
    start, first = 0, None
    while start < len(HOSTILE):
        run = rp.run_case(check, target, hostile_calls, {"first": start}, timeout=240)
        begun = [int(l.split()[1]) for l in run.out.splitlines() if l.startswith("BEGIN ")]
        ended = {int(l.split()[1]) for l in run.out.splitlines() if l.startswith("END ")}
        if run.rc == 0 and len(ended) == len(HOSTILE) - start:
            break
        if not begun or begun[-1] in ended:  # died outside a call: judge no call
            if run.rc != 0 and "NotImplementedError" not in run.err:
                check.that(False, "XAPI-18", "the child failed outside the cases: %s" % run.describe())
                first = first or (start, None)
            break
        n = begun[-1]
        label, _, in_contract = HOSTILE[n]
        what = run.describe()
        if xa.escaped_cxx(run.err) or in_contract:
            check.that(False, "XAPI-18", "%s: the process died (%s)%s" % (
                label, what, ": a C++ exception escaped" if xa.escaped_cxx(run.err) else ""))
        else:
            check.warn("XAPI-18", "%s: the process died (%s) on a malformed tensor the caller should not "
                       "pass" % (label, what))
        first = first or (n, n + 1)
        start = n + 1
    if first is not None:  # the reproducer: the first call that killed the process
        check.set_case(hostile_calls, {"first": first[0], "last": first[1]})


# ============================================================================ consumer side


@consumer("XAPI-04")
def test_consumer_looks_on_the_type(target, check):
    """With one table on the type and another only on the instance, the consumer uses the
    type's (SHOULD); with a table on the instance only, it does not use it."""
    x = xf.consumer_uses_tables(target)
    a, b = _ref.ApiForge(0), _ref.ApiForge(1)
    xf.import_ok(target, xf.forged(x, type_table=a, instance_table=b), x)
    if xf.used_table(b):
        check.warn("XAPI-04", "the consumer used the instance's table, not the one on the type: %r" % b.calls)
    b = _ref.ApiForge(1)
    xf.import_ok(target, xf.forged(x, instance_table=b), x)
    if xf.used_table(b):
        check.warn("XAPI-04", "the consumer used a table found on the instance only (none on the type): %r" % b.calls)
    if not [r for r in check.records if r[0] == "XAPI-04"]:
        check.record("XAPI-04", "pass")


@consumer("XAPI-06")
def test_consumer_checks_the_major(target, check):
    """A table whose major is 2 is never used (its layout is unknown); a different minor is
    fine, and refusing the import over it is stricter than the spec (warn)."""
    x = xf.consumer_uses_tables(target)
    a = _ref.ApiForge(0, major=2, minor=0)
    y, exc, same = xf.import_ok(target, xf.forged(x, type_table=a), x)
    check.that(not xf.used_table(a), "XAPI-06", "the consumer called functions of a major-2 table: %r" % a.calls)
    for minor in (0, 99):
        a = _ref.ApiForge(0, major=1, minor=minor)
        y, exc, same = xf.import_ok(target, xf.forged(x, type_table=a), x)
        if exc is not None:
            check.warn("XAPI-06", "a table with version (1, %d) made the import fail (%s: %s); only the major must "
                       "match (reading in clauses.json)" % (minor, type(exc).__name__, exc))


@consumer("XAPI-11")
def test_consumer_handles_null_dltensor_from(target, check):
    """A table without dltensor_from_py_object_no_sync still imports correctly (with copy=True
    too, where the consumer takes it)."""
    x = xf.consumer_uses_tables(target)
    kws = [{}] + ([{"copy": True}] if "copy" in target.consumer_keywords() else [])
    for kw in kws:
        a = _ref.ApiForge(0, null=["dltensor_from_py_object_no_sync"])
        y, exc, same = xf.import_ok(target, xf.forged(x, type_table=a), x, **kw)
        if exc is not None:
            check.warn("XAPI-11", "from_dlpack(%s) failed on a table whose optional dltensor_from is NULL: %s: %s"
                       % (kw or "", type(exc).__name__, exc))
        else:
            check.that(same, "XAPI-11", "from_dlpack(%s): wrong values with a NULL dltensor_from" % (kw or ""))


# XAPI-19 (consumers launch on current_work_stream) has no check here: `no_check` in clauses.json.
