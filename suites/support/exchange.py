"""The C exchange API of a producer (`__dlpack_c_exchange_api__`, dlpack.h v1.3): finding its
table on the type and reading what its functions give. Hostile calls run in child processes
(repros.run_case); the consumer side forges tables with support/xapi_forge.py."""
from dlconform import kit

from .capsules import SUITE_VERSION
from .dtypes import pick, row_major_strides
from .tensors import make

ATTR = "__dlpack_c_exchange_api__"
ATTR_V12 = "__c_dlpack_exchange_api__"
CAPSULE_NAME = "dlpack_exchange_api"


def sample(target, dtype=None, shape=(2, 3), seed=0):
    """(x, values) of a small tensor the target makes."""
    dtype = dtype or pick(target)[0]
    return make(target, dtype, shape, seed=seed)


class Table:
    """A usable table of type(x): `info` (from kit.exchange_api), `ptr` (int), and the
    attribute value held for as long as this object lives (a table may be owned by it)."""

    def __init__(self, x):
        self.type = type(x)
        self.info = kit.exchange_api(self.type)
        self.keep = getattr(self.type, self.info["attr"], None) if self.info else None
        if self.info and self.info["form"] == "capsule" and self.keep is not None:
            try:  # re-read the pointer from the capsule we hold (it may be a fresh table)
                self.info = kit.exchange_api(self.type)
            except Exception:  # noqa: BLE001
                pass
        self.ptr = self.info["pointer"] if self.info else 0

    def usable(self):
        i = self.info
        return bool(i and i["on_type"] and i["form"] in ("capsule", "int") and i["pointer"]
                    and i["functions"] is not None)


def table(target, x=None):
    """(x, its usable Table), or Unsupported with the reason."""
    if x is None:
        x = sample(target)[0]
    t = Table(x)
    if t.info is None:
        raise kit.Unsupported("%s has no C exchange API (%s on the type is absent)" % (target.name, ATTR))
    if not t.usable():
        raise kit.Unsupported("%s has no usable exchange table on its type (attr %s, form %s, on_type %s, version %s)"
                              % (target.name, t.info["attr"], t.info["form"], t.info["on_type"], t.info["version"]))
    return x, t


def norm_strides(info):
    """Strides of an inspect() dict, row-major when NULL, ignoring dims of extent <= 1."""
    shape = tuple(info.get("shape") or ())
    strides = info.get("strides")
    if strides is None:
        strides = row_major_strides(shape)
    return tuple(s if n > 1 else None for n, s in zip(shape, strides))


def escaped_cxx(stderr):
    """True when stderr shows a C++ exception reaching std::terminate (XAPI-18)."""
    return "terminate called" in stderr or "std::terminate" in stderr


def descriptions(target, v, table):
    """(path, inspect()-like dict, release) of each way the producer describes v; a path that
    refuses v is left out (refusing is the keyword and dtype checks' business)."""
    out = []
    for path, kw in (("legacy", {}), ("versioned", {"max_version": SUITE_VERSION})):
        cap, exc = kit.attempt(lambda: v.__dlpack__(**kw))
        if exc is None:
            out.append((path, kit.inspect(cap), cap))
    if table is not None:
        fns = table.info["functions"]
        if fns["managed_tensor_from_py_object_no_sync"]:
            rc, h, exc = kit.xapi_managed_from(table.ptr, v)
            if rc == 0 and h is not None:
                out.append(("xapi managed", h.inspect(), h))
        if fns["dltensor_from_py_object_no_sync"]:
            rc, d = kit.xapi_dltensor_from(table.ptr, v)
            if rc == 0:
                out.append(("xapi dltensor", d, None))
    return out


def table_or_none(target, x):
    """The usable Table of type(x), or None (table() says why not)."""
    try:
        return table(target, x)[1]
    except kit.Unsupported:
        return None


def table_with(target, function, why):
    """table(target) when the table's `function` is not NULL; Unsupported else (`why`: the
    clause that judges a NULL one)."""
    x, t = table(target)
    if not t.info["functions"][function]:
        raise kit.Unsupported("%s is NULL (%s)" % (function, why))
    return x, t
