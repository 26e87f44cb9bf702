"""Record format 2 (fuzz/record.h, fuzz/README.md "Record format 2") and its memory plan.

decode() reads any byte string as dlc_rec_decode does: missing bytes read as 0, extra bytes
are ignored, no value is rejected. plan() is dlc_rec_plan (fuzz/layout.c) with check's own
extent arithmetic (dlconform._probe.extent), so the Python side never re-implements it.
"""
import struct

HEADER = 68
CAP = 1 << 20  # DLC_REC_BUFFER_CAP
MAX_NDIM = 127  # DLC_REC_MAX_NDIM: ndim is an int8
HEAD = struct.Struct("<BBbBBBHiiIIQQiiiiqBBBB")
KIND = {"versioned": 0x01, "strides_null": 0x02, "shape_null": 0x04, "deleter_null": 0x08,
        "data_null": 0x10, "dangling": 0x20, "used": 0x40}
KW = {"max_version": 0x01, "copy": 0x02, "dl_device": 0x04, "stream": 0x08, "old_producer": 0x10,
      "strict_producer": 0x20, "side_stream": 0x40}
KW_PASSED = 0x0F
# byte 67 (DLC_OFFER_*): the kind in bits 0..2, bit 3 the major-0 variant of "major"
OFFERS = ("none", "type", "instance", "major", "null_dltensor", "chained", "shadowed", "minor")
OFFER_KIND, OFFER_MAJOR0 = 0x07, 0x08
# DLC_COPY_*, and what from_dlpack gets for each; ABSENT: no copy= passed
COPY_ABSENT, COPY_NONE, COPY_FALSE, COPY_TRUE = -1, 0, 1, 2
COPY_VALUES = (None, False, True)
READ_ONLY, IS_COPIED = 1, 2  # DLPACK_FLAG_BITMASK_*
# DT-12: the array-API dtypes every consumer must import, as (code, bits) with lanes 1, in
# the order of target_producer.c's k_dtypes and producer_views.DTYPES
ARRAY_API_DTYPES = ((6, 8), (0, 8), (0, 16), (0, 32), (0, 64), (1, 8), (1, 16), (1, 32), (1, 64), (2, 32),
                    (2, 64), (5, 64), (5, 128))
CPU, CUDA, ROCM = 1, 2, 10  # kDLCPU, kDLCUDA, kDLROCM
#: the DLDeviceType values of DLPack 1.3 (check's dlc_is_known_device(type, 1, 3))
KNOWN_DEVICES = frozenset((1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18))


def decode(data):
    """dict of the record's fields, exactly as dlc_rec_decode reads them (copy and stream_kind
    raw: their users take them mod 3)."""
    b = bytes(data[:HEADER]).ljust(HEADER, b"\0")
    (fmt, kind, ndim, code, bits, kw, lanes, dev_type, dev_id, vmaj, vmin, flags, off, mv_maj,
     mv_min, kdev_type, kdev_id, stream, copy, stream_kind, seed, offer) = HEAD.unpack(b)
    n = max(ndim, 0)
    tail = bytes(data[HEADER:HEADER + 16 * n]).ljust(16 * n, b"\0")
    shape = struct.unpack("<%dq" % n, tail[:8 * n]) if n else ()
    strides = struct.unpack("<%dq" % n, tail[8 * n:]) if n else ()
    return dict(format=fmt, kind=kind, ndim=ndim, dtype=(code, bits, lanes), device=(dev_type, dev_id),
                version=(vmaj, vmin), flags=flags, byte_offset=off, kw=kw, max_version=(mv_maj, mv_min),
                kw_device=(kdev_type, kdev_id), stream=stream, copy=copy, stream_kind=stream_kind,
                seed=seed, offer=offer, shape=tuple(shape), strides=tuple(strides))


def encode(rec):
    """dlc_rec_encode: the canonical bytes of a record (decode(encode(r)) == r)."""
    n = max(rec["ndim"], 0)
    head = HEAD.pack(rec["format"], rec["kind"], rec["ndim"], *rec["dtype"][:2], rec["kw"], rec["dtype"][2],
                     *rec["device"], *rec["version"], rec["flags"], rec["byte_offset"], *rec["max_version"],
                     *rec["kw_device"], rec["stream"], rec["copy"], rec["stream_kind"], rec["seed"],
                     rec["offer"])
    dims = (tuple(rec["shape"]) + (0,) * n)[:n] + (tuple(rec["strides"]) + (0,) * n)[:n]
    return head + struct.pack("<%dq" % (2 * n), *dims)


def offer_kind(rec):
    return rec["offer"] & OFFER_KIND


def apply_offer(rec):
    """dlc_rec_apply_offer: an offered export is versioned (the table hands out
    DLManagedTensorVersioned only). Returns rec, changed in place."""
    if offer_kind(rec):
        rec["kind"] |= KIND["versioned"]
    return rec


def versioned(rec):
    return bool(rec["kind"] & KIND["versioned"])


def metadata_capsule(rec):
    """A legacy capsule of the record's DLTensor with data NULL, for check's own rules."""
    from .. import _ref

    k = rec["kind"]
    meta = _ref.Forge(dtype=rec["dtype"], shape=rec["shape"], ndim=rec["ndim"], data="null",
                      strides=None if k & KIND["strides_null"] else rec["strides"],
                      shape_null=bool(k & KIND["shape_null"]), byte_offset=rec["byte_offset"],
                      versioned=False, device=rec["device"])
    return meta.capsule()


def plan(rec):
    """dlc_rec_plan with the 1 MiB cap: dict mode ("buffer", "null" or "dangling"), pad, size,
    readonly, and ext, the extent from check (dlconform._probe.extent)."""
    from .. import _probe

    k = rec["kind"]
    ext = _probe.extent(metadata_capsule(rec))
    p = {"ext": ext, "pad": 0, "size": 0, "readonly": versioned(rec) and bool(rec["flags"] & READ_ONLY)}
    unsized = "dangling" if k & KIND["dangling"] else "null"
    if k & KIND["data_null"]:
        p["mode"] = "null"
    elif ext["status"] != "ok":
        p["mode"] = unsized
    else:
        off = rec["byte_offset"]
        pad = max(0, -ext["lo"] - off)
        size = max(1, pad + off + ext["hi"])
        p.update(mode="buffer" if size <= CAP else unsized, pad=pad, size=size if size <= CAP else 0)
    return p


def too_big_to_copy(p):
    """As fuzz/target_consumer.c: a copy would read dangling data or allocate past the cap."""
    ext = p["ext"]
    return ext["status"] == "ok" and (p["mode"] == "dangling" or ext["numel"] * ext["itemsize"] > CAP)


def copy_passed(rec, p):
    """The COPY_* value the consumer target passes to from_dlpack (copy_passed in
    fuzz/target_consumer.c): COPY_ABSENT when it passes none."""
    if not rec["kw"] & KW["copy"]:
        return COPY_ABSENT
    copy = rec["copy"] % 3
    return COPY_ABSENT if copy == COPY_TRUE and too_big_to_copy(p) else copy


def drop_giant_copies(rec, p):
    """drop_giant_copies in fuzz/target_consumer.c: no device= for an export of another
    device that is too big to copy. Changes rec in place, so every oracle sees the keywords
    as passed."""
    if rec["device"][0] != CPU and too_big_to_copy(p):
        rec["kw"] &= ~KW["dl_device"]


def from_dlpack_kwargs(rec, copy):
    """The keywords the consumer target passes (fuzz/exchange.c): copy when not absent, and
    device= as 'cpu' for (1, 0) (the array API's name) or the pair as it is."""
    kw = {}
    if copy != COPY_ABSENT:
        kw["copy"] = COPY_VALUES[copy]
    if rec["kw"] & KW["dl_device"]:
        kw["device"] = "cpu" if rec["kw_device"] == (CPU, 0) else rec["kw_device"]
    return kw


def row_major_strides(ndim, shape):
    """dlc_row_major_strides: compact row-major strides in elements, or None when ndim or a
    extent is negative or a stride overflows int64."""
    if ndim < 0:
        return None
    out, s = [0] * ndim, 1
    for i in range(ndim - 1, -1, -1):
        if shape[i] < 0:
            return None
        out[i] = s
        if i > 0:
            s *= shape[i] if shape[i] > 0 else 1
            if s >= 1 << 63:
                return None
    return tuple(out)
