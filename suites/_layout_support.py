"""Private helpers of test_ownership.py, test_layout.py and test_dtype.py.

Producer side: native views with reproducer lines, exports, the native layout of a view
(strides in elements, first-element address) so exported metadata can be compared before any
byte is read. Consumer side: forged capsules handed out by a recording producer that keeps
its capsules, import attempts whose exceptions are reduced to (type, message) so no
traceback keeps a capsule alive, and deleter accounting.
"""
import gc

from dlconform import _probe
from dlconform.producers import RecordingProducer, forges
from dlconform.verdicts import Unsupported

DLPACK_FLAG_READ_ONLY = 1
DLPACK_FLAG_IS_COPIED = 2
DLPACK_FLAG_SUBBYTE_PADDED = 4


# ------------------------------------------------------------------------ targets
def lib(target):
    name = getattr(target, "library", None) or ""
    if name == "numpy":
        return "numpy"
    if name == "torch":
        return "torch"
    if name == "dlconform._ref":
        return "ref"
    return "other"


def setup_lines(target):
    lines = list(target.repro_setup()) + ["import gc", "from dlconform import _ref, _probe",
                                          "from dlconform.producers import RecordingProducer, forges"]
    if lib(target) == "other":
        lines += ["from dlconform.targets.loader import load", "T = load(%r)" % target.name]
    return lines


def make_lines(target, dtype, shape, values, var="x"):
    if lib(target) == "other":
        from dlconform.repro import bytes_literal
        return ["%s = T.make(%r, %r, %s)" % (var, dtype, tuple(shape), bytes_literal(values))]
    return list(target.repro_make(dtype, shape, values, var))


def consumer_expr(target, arg="p"):
    k = lib(target)
    if k == "numpy":
        return "np.from_dlpack(%s)" % arg
    if k == "torch":
        return "torch.utils.dlpack.from_dlpack(%s)" % arg
    if k == "ref":
        return "_ref.from_dlpack(%s)" % arg
    return "T.from_dlpack(%s)" % arg


def values_for(dtype_itemsize, numel, seed=0):
    """Distinct-ish element bytes, avoiding NaN-prone patterns being compared by value: we
    compare bytes, never values."""
    return bytes(((i * 37 + seed * 11 + 5) & 0x7F) for i in range(numel * dtype_itemsize))


def bool_values(numel):
    return bytes((i % 3 == 1) for i in range(numel))


def _index_text(ndim, dim, start, stop, step):
    idx = [":"] * ndim
    idx[dim] = "%s:%s:%s" % (start, "" if stop is None else stop, step)
    return ", ".join(idx) + ("," if ndim == 1 else "")


def apply_ops(target, x, ops, var="x"):
    """Applies native view ops. Returns (view, lines, unsupported_op or None)."""
    cur, name, lines = x, var, []
    k = lib(target)
    for i, op in enumerate(ops):
        dst = "v%d" % i
        nd = len(_native_shape(target, cur))
        if op[0] == "transpose":
            v = target.transpose(cur, op[1])
        elif op[0] == "slice":
            _, dim, start, stop, step = op
            v = target.slice(cur, dim, start, stop, step)
        else:
            v = target.flip(cur, op[1])
        if v is None:
            return None, lines, op
        if k == "numpy":
            line = ("%s = %s.transpose(%r)" % (dst, name, tuple(op[1])) if op[0] == "transpose" else
                    "%s = %s[%s]" % (dst, name, _index_text(nd, *op[1:])) if op[0] == "slice" else
                    "%s = np.flip(%s, %d)" % (dst, name, op[1]))
        elif k == "torch":
            line = ("%s = %s.permute(*%r)" % (dst, name, tuple(op[1])) if op[0] == "transpose" else
                    "%s = %s[%s]" % (dst, name, _index_text(nd, *op[1:])))
        elif k == "ref":
            line = "%s = %s.view(%r, %r, %d)" % (dst, name, tuple(v.shape), tuple(v.strides), v.byte_offset)
        else:
            line = ("%s = T.transpose(%s, %r)" % (dst, name, tuple(op[1])) if op[0] == "transpose" else
                    "%s = T.slice(%s, %d, %r, %r, %r)" % ((dst, name) + tuple(op[1:])) if op[0] == "slice" else
                    "%s = T.flip(%s, %d)" % (dst, name, op[1]))
        lines.append(line)
        cur, name = v, dst
    return cur, lines, None


def _native_shape(target, x):
    k = lib(target)
    if k == "torch":
        return tuple(x.shape)
    return tuple(s() if callable(s := getattr(x, "shape", ())) else s)  # OrtValue.shape() is a method


def native_layout(target, x):
    """(shape, element strides, first-element address) of a native tensor, or None when the
    adapter's library is not known here."""
    k = lib(target)
    try:
        if k == "numpy":
            it = x.dtype.itemsize
            return tuple(x.shape), tuple(s // it for s in x.strides), x.__array_interface__["data"][0]
        if k == "torch":
            return tuple(x.shape), tuple(x.stride()), x.data_ptr()
        if k == "ref":
            return tuple(x.shape), tuple(x.strides), x.data_ptr + x.byte_offset
    except Exception:
        return None
    return None


def export(x, versioned=False):
    """x.__dlpack__() (legacy) or with max_version=(1, 3); a producer without max_version is
    Unsupported for versioned exports."""
    if not versioned:
        return x.__dlpack__()
    try:
        return x.__dlpack__(max_version=(1, 3))
    except TypeError as e:
        raise Unsupported("legacy-only producer: __dlpack__(max_version=(1, 3)) raised TypeError (%s)" % e)


def versioned_supported(x):
    try:
        cap = x.__dlpack__(max_version=(1, 3))
    except TypeError:
        return False
    except Exception:
        return True
    del cap
    return True


def compare_layout(target, x, info, itemsize):
    """Exported metadata against the native layout, ignoring strides of dims of extent <= 1.
    Returns a list of (clause, message); empty when consistent or when the layout is unknown."""
    nat = native_layout(target, x)
    if nat is None:
        return []
    shape, strides, first = nat
    out = []
    if tuple(info["shape"] or ()) != shape:
        out.append(("LAY-09", "exported shape %r, the tensor's shape is %r" % (info["shape"], shape)))
        return out
    if any(n == 0 for n in shape):
        return out
    exp = info["strides"]
    if exp is None:
        exp = _row_major(shape)
    diff = [d for d, n in enumerate(shape) if n > 1 and exp[d] != strides[d]]
    if diff:
        if all(exp[d] == strides[d] * itemsize for d in diff):
            out.append(("LAY-05", "strides %r are in bytes: the tensor's element strides are %r (itemsize %d)"
                        % (tuple(exp), strides, itemsize)))
        else:
            out.append(("LAY-05", "exported strides %r do not describe the tensor (element strides %r)"
                        % (tuple(exp), strides)))
    if info["data"] is not None and info["data"] + info["byte_offset"] != first:
        out.append(("LAY-03", "data + byte_offset = %#x, but the first element is at %#x (%+d bytes)"
                    % (info["data"] + info["byte_offset"], first, info["data"] + info["byte_offset"] - first)))
    return out


def _row_major(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


# ------------------------------------------------------------------------ consumers
class KeepingProducer(RecordingProducer):
    """RecordingProducer that also keeps every capsule it hands out (`.capsules`)."""

    def __init__(self, forge, **kw):
        super().__init__(forge, **kw)
        self.capsules = []

    def __dlpack__(self, *args, **kw):
        cap = super().__dlpack__(*args, **kw)
        self.capsules.append(cap)
        return cap


def bad_exception(etype, msg):
    """Why a refusal is not a clean exception, or None."""
    if etype is SystemError or (isinstance(etype, type) and issubclass(etype, SystemError)):
        return "SystemError (%s)" % msg
    if "without setting an exception" in msg or "with an exception set" in msg:
        return "%s: %s" % (etype.__name__, msg)
    return None


class Attempt:
    """One import: `.producer`, `.result` (or None), `.etype`/`.emsg` of a refusal."""

    def __init__(self, target, forge_kwargs=None, forge=None, **producer_kw):
        self.forge_kwargs = valid_kwargs(forge_kwargs or {})
        self.factory = forge if forge is not None else forges(**self.forge_kwargs)
        self.producer = KeepingProducer(self.factory, **producer_kw)
        self.result, self.etype, self.emsg = None, None, ""
        try:
            self.result = target.from_dlpack(self.producer)
        except Exception as e:  # noqa: BLE001 - reduced to (type, message) at once
            self.etype, self.emsg = type(e), str(e).splitlines()[0][:300] if str(e) else ""
            e.__traceback__ = None
            del e

    @property
    def refused(self):
        return self.result is None

    @property
    def forge(self):
        return self.producer.forges.get(self.producer.last_kind) if self.producer.last_kind else None

    def calls(self):
        return sum(f.deleter_calls for f in self.producer.forges.values())

    def names(self):
        out = []
        for c in self.producer.capsules:
            try:
                out.append(_probe.inspect(c)["name"])
            except Exception:
                out.append(None)
        return out

    def settle(self):
        """Drops the kept capsules, then the result; returns the deleter calls afterwards. The
        capsules go first, while the result lives (see _capsule_support.drop_capsules): one the
        consumer did not rename but keeps then dies with the result, one it neither renamed nor
        keeps is kept alive (its destructor's extra deleter call is the CAP-03 breach's doing)."""
        from _capsule_support import drop_capsules

        drop_capsules(self.producer, imported=not self.refused)
        self.result = None
        gc.collect()
        return self.calls()

    def refusal(self):
        return "%s: %s" % (self.etype.__name__, self.emsg) if self.etype else ""


def valid_kwargs(kw):
    """Forge keywords with explicit row-major strides unless the test gives strides: a
    versioned 1.3 capsule must not have NULL strides for ndim > 0 (LAY-06)."""
    kw = dict(kw)
    if "strides" not in kw:
        shape = tuple(kw.get("shape", (4,)))
        kw["strides"] = _row_major(shape) if shape else None
    return kw


def attempt_lines(target, forge_kwargs, legacy_only=False):
    forge_kwargs = valid_kwargs(forge_kwargs)
    kw = ", ".join("%s=%r" % kv for kv in sorted(forge_kwargs.items()))
    return setup_lines(target) + [
        "fac = forges(%s)" % kw,
        "p = RecordingProducer(fac%s)" % (", legacy_only=True" if legacy_only else ""),
        "y = %s  # consumer under test" % consumer_expr(target, "p"),
        "print(repr(y)[:300])",
        "f = p.forges[p.last_kind]",
        "print('calls while alive', f.deleter_calls)",
        "try: print('expected elements', f.expected_elements().hex())",
        "except ValueError as e: print('no elements to compare (an invalid layout):', e)",
        "del y; gc.collect(); print('calls after del', f.deleter_calls)",
    ]


def result_bytes(target, y):
    d = target.describe(y)
    if any(int(n) == 0 for n in d["shape"]):
        return d, b""
    return d, _probe.gather(d["ptr"], tuple(d["shape"]), tuple(d["strides"]), d["itemsize"])


def deleter_accounting(check, att, alive_calls, clause="OWN-03", what=""):
    """Records OWN-03: 0 calls while the result lives, exactly 1 after it (and the capsules)
    are gone. Call settle() first to get `after`."""
    imported = not att.refused
    after = att.settle()
    if imported:
        check.that(alive_calls == 0, clause, "%sthe deleter ran %d time(s) while the imported result was alive"
                   % (what, alive_calls))
    check.that(after == 1, clause, "%sthe deleter ran %d time(s) in all after the result died (expected exactly 1)"
               % (what, after))
    return after


# ------------------------------------------------------------------------ hypothesis glue
class Finding(Exception):
    """Raised inside a hypothesis body for a fail-level finding so the example shrinks."""

    def __init__(self, records, lines):
        super().__init__("; ".join("%s %s: %s" % r for r in records))
        self.records = records
        self.lines = lines


def run_cases(check, clauses, given_fn):
    """Runs a @given-decorated zero-argument function whose body raises Finding for fails;
    records the shrunk finding, or pass for every clause."""
    try:
        given_fn()
    except Finding as f:
        check.repro(f.lines)
        for clause, verdict, message in f.records:
            check.record(clause, verdict, message)
    for clause in clauses:
        check.record(clause, "pass", "")


def settle_records(check, state, records, lines):
    """Fail-level records raise Finding; warn-level ones are recorded (first repro kept)."""
    fails = [r for r in records if r[1] in ("fail", "crash")]
    if fails:
        raise Finding(fails, lines)
    for clause, verdict, message in records:
        check.record(clause, verdict, message)
        if not state.get("repro"):
            state["repro"] = True
            check.repro(lines)


def repro_once(check, lines):
    """Sets the reproducer unless an earlier case of this test already recorded a non-pass
    (so the snippet reproduces the first finding, not the last case tried)."""
    if any(v != "pass" for _, v, _ in check.records):
        return
    check.repro(lines)


def must_refuse(check, target, kw, clause, what, count_clause="OWN-03"):
    """The consumer must refuse the forged capsule `kw` (a clean exception, no crash), and the
    deleter must then run exactly once (recorded under count_clause)."""
    repro_once(check, attempt_lines(target, kw))
    att = Attempt(target, kw)
    if not att.refused:
        check.record(clause, "fail", "%s was imported (result %r)" % (what, target.describe(att.result)))
    else:
        check_clean_refusal(check, att, clause, what)
    check_deleted_once(check, att, count_clause, what, "the refusal")


def check_clean_refusal(check, att, clause, what):
    """A refused attempt raised a class the spec allows, cleanly (bad_exception)."""
    why = bad_exception(att.etype, att.emsg)
    check.that(why is None, clause, "%s refused uncleanly: %s" % (what, why))


def check_deleted_once(check, att, clause, what, after_what):
    """Once the attempt is dropped, the forged capsule's deleter has run exactly once."""
    after = att.settle()
    check.that(after == 1, clause, "%s: the deleter ran %d time(s) after %s (expected 1)" % (what, after, after_what))
