"""Every field a producer fills, checked against its clause, on every path it fills them:
the legacy capsule, the versioned capsule, and where the producer has a C exchange API the
tensors managed_tensor_from_py_object_no_sync hands out and the DLTensor
dltensor_from_py_object_no_sync fills; and the exchange table's own header (version,
prev_api). The tensors are generated (dtypes the library has x views of them).

| field | clause | rule |
| --- | --- | --- |
| capsule name | CAP-01, CAP-02 | "dltensor" / "dltensor_versioned" |
| version | VER-07 | the producer's one version: a hand-out says what its capsules say |
| flags | FLG-01 | no undefined bit |
| device | DEV-03 | what __dlpack_device__ says |
| ndim, shape, strides, data + byte_offset | LAY-09, LAY-05, LAY-03 | the tensor's own layout |
| strides of a versioned tensor | LAY-06 | non-NULL for ndim > 0 |
| dtype | DT-01 .. DT-13 | the header's (code, bits, lanes) of the tensor's dtype |
| header.version | VER-07 | the version the capsules carry (prev_api: test_exchange_api.py) |
"""
from hypothesis import strategies as st

from dlconform import kit
from support import capsules as pycap
from support import dtypes as dty
from support import exchange as xa
from support import strategies as hh
from support import tensors as tns
from support.marks import producer

CLAUSES = ("CAP-01", "CAP-02", "VER-07", "FLG-01", "DEV-03", "LAY-05", "LAY-06")


def _fields(target, v, info, path, dtype, own_version):
    """(clause, message) for each field of one export (an inspect() dict) that breaks its rule."""
    out = []
    name = info.get("name")
    # a versioned capsule, named as one, for a call without max_version is VER-02's finding
    # (test_versioning.py): what it holds has the right name
    if path == "legacy" and name not in (pycap.LEGACY, pycap.VERSIONED):
        out.append(("CAP-01", "the legacy capsule is named %r" % (name,)))
    if path == "versioned" and name != pycap.VERSIONED:
        out.append(("CAP-02", "the versioned capsule is named %r" % (name,)))
    if info.get("kind") == "unknown":
        return out  # a capsule of another name is not read
    if path in ("versioned", "xapi managed"):
        version = tuple(info.get("version") or ())
        if own_version and version != own_version:
            out.append(("VER-07", "%s: version %r, while the producer's versioned capsules say %r"
                        % (path, version, own_version)))
        if not info.get("readable", True):
            return out
        flags = info.get("flags") or 0
        if flags & ~pycap.DEFINED_FLAGS:
            out.append(("FLG-01", "%s: flags %#x set undefined bits" % (path, flags)))
        if info.get("ndim", 0) > 0 and info.get("strides") is None:
            out.append(("LAY-06", "%s: NULL strides for ndim %d" % (path, info["ndim"])))
    device = tuple(int(d) for d in v.__dlpack_device__())
    if tuple(info.get("device") or ()) != device:
        out.append(("DEV-03", "%s: device %r, __dlpack_device__ says %r" % (path, info.get("device"), device)))
    if tuple(info.get("dtype") or ()) != dty.DTYPES[dtype]:
        out.append((dty.clause_of(dtype), "%s: %s exported as (code, bits, lanes) %r, the header's is %r"
                    % (path, dtype, info.get("dtype"), dty.DTYPES[dtype])))
    for clause, message in tns.compare_layout(target, v, info, dty.itemsize(dtype)):
        out.append((clause, "%s: %s" % (path, message)))
    return out


@st.composite
def _views_of(draw, names):
    """A dtype of `names`, a shape and native view operations on it (drawn in this order)."""
    dtype = draw(st.sampled_from(names))
    shape = draw(hh.shapes(0, 3, 4, max_numel=60))
    return {"dtype": dtype, "shape": shape, "ops": draw(hh.view_ops(len(shape)))}


def fields_of_view(target, check, dtype, shape, ops, own_version):
    """One generated tensor (dtype, shape, view operations) described on every path: each
    field that breaks its rule is a fail."""
    x = target.make(dtype, shape, dty.distinct_values(dtype, shape))
    v = tns.apply_views(target, x, ops)[0]
    if v is None:
        return
    for path, info, keep in xa.descriptions(target, v, xa.table_or_none(target, x)):
        for clause, message in _fields(target, v, info, path, dtype, own_version):
            check.record(clause, "fail", message)
        if path == "xapi managed":
            keep.release()


@producer(*CLAUSES, feeds="valid")
def test_producer_fields_on_every_path(target, check):
    """Generated tensors (dtype x views) described on every path: each field obeys its clause."""
    names = [d for d in target.dtypes() if d in dty.DTYPES and d not in dty.SUBBYTE]
    if not names:
        raise kit.Unsupported("%s has no byte-sized dtype" % target.name)
    x0 = target.make(names[0], (2,), dty.distinct_values(names[0], (2,)))
    table = xa.table_or_none(target, x0)
    own_version = None
    try:
        own_version = tuple(kit.inspect(pycap.export_versioned(x0)).get("version") or ()) or None
    except Exception:  # noqa: BLE001 - a legacy-only producer has no version to keep
        pass
    hh.explore(check, fields_of_view, target, _views_of(names), max_examples=15,
               seed=0x5ad2b1f0e7c4493d8e0a6b1c2d3f4a5b, own_version=own_version)
    # the clauses no path of this producer reaches: the versioned capsule's name and version
    # need a versioned capsule; its flags and strides a versioned capsule or an owning
    # exchange-table hand-out
    if own_version is None:
        why = "the producer makes no versioned capsule (max_version=%r answered without one)" % (pycap.SUITE_VERSION,)
        for clause in ("CAP-02", "VER-07"):
            check.record(clause, "unsupported", why)
        for clause in ("FLG-01", "LAY-06") if table is None else ():
            check.record(clause, "unsupported", why + " and has no C exchange API")


@producer("VER-07", feeds="valid")
def test_exchange_table_header_version(target, check):
    """The table's header.version is the producer's version, the one its versioned capsules
    carry (prev_api is test_exchange_api.py's XAPI-07)."""
    x, table = xa.table(target)
    info = kit.inspect(pycap.export_versioned(x))
    if info["kind"] != "versioned":
        raise kit.Unsupported("the producer answers max_version=(1, 3) with a %r capsule" % (info["name"],))
    check.equal(tuple(table.info["version"]), tuple(info["version"]), "VER-07",
                "the exchange table's header.version against the versioned capsule's version")
