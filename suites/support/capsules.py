"""DLPack capsules: names, flags and versions, the exports that ask a producer for each kind,
where a capsule's name string lives, and the ABI offsets of the managed structs."""
import ctypes

from dlconform import kit
from dlconform.kit.abi import (DEFINED_FLAGS, FLAG_IS_COPIED, FLAG_READ_ONLY, FLAG_SUBBYTE_PADDED, LEGACY,
                               USED_LEGACY, USED_NAMES, USED_VERSIONED, VERSIONED, capsule_name_pointer, is_capsule,
                               keep_forever)

from .tensors import make

#: the kit's names the suites read as pycap.NAME
__all__ = ["DEFINED_FLAGS", "FLAG_IS_COPIED", "FLAG_READ_ONLY", "FLAG_SUBBYTE_PADDED", "LEGACY", "USED_LEGACY",
           "USED_NAMES", "USED_VERSIONED", "VERSIONED", "is_capsule", "keep_forever", "SUITE_VERSION", "MAX_VERSIONS",
           "name_pointer", "keyword_rejected", "export_versioned", "export_kind", "producer_is_legacy_only",
           "versioned_supported", "address", "fields", "versioned_with_flags", "deleter_offset", "manager_ctx_offset",
           "read_word", "NAMES", "readable_exports", "export_cases", "garbled", "garbled_at", "name_problem"]

#: the newest DLPack version the suite knows (dlpack.h v1.3)
SUITE_VERSION = kit.DLPACK_VERSION
#: max_version values a consumer at DLPack 1.x may pass
MAX_VERSIONS = ((1, 0), (1, 3), (1, 99), (2, 0), (99, 99))


def garbled(name):
    """Whether a capsule's name, as kit.inspect decodes it, reads as no name at all (empty, not
    printable ASCII, or bytes the decoding escaped): the string it points at was freed and its
    memory holds something else (CAP-09)."""
    return name is not None and (not name or not (name.isascii() and name.isprintable()) or "\\" in name)


def garbled_at(pointer):
    """garbled() of the raw bytes of the name string at `pointer` (name_pointer(); 0 for NULL)."""
    if not pointer:
        return False
    raw = ctypes.string_at(pointer)
    return not raw or not all(32 <= b < 127 and b != 0x5C for b in raw)


def name_problem(name, used):
    """Why a capsule named `name` after an import is not renamed `used` (CAP-03), in words."""
    if garbled(name):
        return "its name reads %r: the consumer renamed it with a string that did not outlive it (CAP-09), so it no " \
            "longer says %s" % (name, used)
    return "its name is %r, expected %r" % (name, used)


def name_pointer(capsule):
    """The address of the capsule's name string (PyCapsule_GetName); 0 for a NULL name."""
    return capsule_name_pointer(capsule) or 0


# ---------------------------------------------------------------------------- exports
def keyword_rejected(exc, keyword):
    """True when a TypeError says the keyword is unknown (an old, pre-2023.12 producer)."""
    if not isinstance(exc, TypeError):
        return False
    text = str(exc)
    return keyword in text or "keyword" in text


def export_versioned(x, max_version=SUITE_VERSION, **kw):
    """x.__dlpack__(max_version=...): Unsupported when the producer predates the keyword (a
    TypeError naming it); any other error propagates."""
    try:
        return x.__dlpack__(max_version=max_version, **kw)
    except TypeError as e:
        if keyword_rejected(e, "max_version"):
            raise kit.Unsupported("legacy-only producer: __dlpack__ rejects max_version (%s: %s); it predates "
                              "DLPack 1.0 / array API 2023.12" % (type(e).__name__, e))
        raise


def export_kind(x, versioned):
    """x.__dlpack__() (legacy) or with max_version=(1, 3); any TypeError of the versioned call is
    Unsupported (a legacy-only producer)."""
    if not versioned:
        return x.__dlpack__()
    try:
        return x.__dlpack__(max_version=(1, 3))
    except TypeError as e:
        raise kit.Unsupported("legacy-only producer: __dlpack__(max_version=(1, 3)) raised TypeError (%s)" % e)


def producer_is_legacy_only(x):
    """True when x.__dlpack__ rejects max_version as an unknown keyword; other errors propagate."""
    try:
        cap = x.__dlpack__(max_version=SUITE_VERSION)
    except TypeError as e:
        if keyword_rejected(e, "max_version"):
            return True
        raise
    del cap
    return False


def versioned_supported(x):
    """Whether x exports versioned capsules: False for any TypeError of max_version, True when
    it exports or refuses for another reason."""
    try:
        return not producer_is_legacy_only(x)
    except TypeError:
        return False
    except Exception:  # noqa: BLE001 - refusing this tensor is not lacking the keyword
        return True


def address(info):
    """data + byte_offset of an inspect() dict: the first element's address; None for NULL data."""
    return None if info.get("data") is None else info["data"] + (info.get("byte_offset") or 0)


def fields(cap):
    """kit.inspect(cap) of a producer's export whose fields a check reads. An export that is
    not a DLPack capsule (another name: CAP-01, CAP-02 judge it) or whose fields may not be
    read (another major version: VER-07, VER-08) leaves the check nothing to judge: Unsupported,
    naming why, rather than a lookup of fields the capsule does not have."""
    info = kit.inspect(cap)
    if info["kind"] not in ("legacy", "versioned"):
        raise kit.Unsupported("the export is not a DLPack capsule (name %r): its fields cannot be read; CAP-01 "
                          "and CAP-02 judge the name" % (info["name"],))
    if not info.get("readable", True):
        raise kit.Unsupported("the export carries version %r: its fields are not read (VER-07, VER-08)"
                          % (info.get("version"),))
    return info


def versioned_with_flags(x, **kw):
    """A versioned capsule of x with its inspect() dict; Unsupported for legacy-only producers
    and when the producer returned a legacy capsule anyway."""
    cap = export_versioned(x, **kw)
    info = kit.inspect(cap)
    if info["kind"] != "versioned":
        raise kit.Unsupported("the producer returned a %r capsule for max_version=%r" % (info["name"], SUITE_VERSION))
    if not info.get("readable", True):
        raise kit.Unsupported("the versioned capsule carries version %r: its fields are not read (VER-07)"
                          % (info.get("version"),))
    return cap, info


# ---------------------------------------------------------------------------- ABI offsets
# ABI of dlpack.h (checked by probes/abi.h): the DLTensor is 48 bytes; DLManagedTensor =
# {DLTensor, manager_ctx, deleter}; DLManagedTensorVersioned = {version, manager_ctx, deleter,
# flags, DLTensor}.
def deleter_offset(kind):
    return {"legacy": 56, "versioned": 16}[kind]


def manager_ctx_offset(kind):
    return {"legacy": 48, "versioned": 8}[kind]


def read_word(address):
    return ctypes.c_void_p.from_address(address).value or 0


def readable_exports(target, x, dtype="float32", shape=(2, 3)):
    """[(kind, capsule factory)] for the capsule kinds the producer offers. Each call exports a
    fresh tensor equal to x (versioned exports may share one cached struct per tensor, and the
    deleter trampoline of kit.instrument stays on a struct once installed)."""
    keep = [x]
    values = target.expected(x)

    def fresh():
        t = target.make(dtype, shape, values)
        keep.append(t)
        return t

    candidates = [("legacy", lambda: fresh().__dlpack__())]
    if not producer_is_legacy_only(x):
        candidates.append(("versioned", lambda: fresh().__dlpack__(max_version=SUITE_VERSION)))
    out, skipped = [], []
    for kind, export in candidates:
        # only capsules the probe may read: the right name (CAP-01/CAP-02) and, for versioned
        # ones, major version 1 (VER-07); other clauses report those breaches
        info = kit.inspect(export())
        want = NAMES[kind]
        if info["name"] != want:
            skipped.append("%s exports are named %r (CAP-01/CAP-02)" % (kind, info["name"]))
        elif not info.get("readable", True):
            skipped.append("%s exports carry version %r, unreadable here (VER-07)" % (kind, info.get("version")))
        else:
            out.append((kind, export))
    if not out:
        raise kit.Unsupported("no capsule this check can read: " + "; ".join(skipped))
    return out


def export_cases(target):
    """(kind, export, x's values) for each capsule kind the producer of a float32 (2, 3) tensor
    x offers (readable_exports)."""
    x, values = make(target)
    for kind, export in readable_exports(target, x):
        yield kind, export, values


#: the unconsumed capsule name of each kind (CAP-01, CAP-02)
NAMES = {"legacy": LEGACY, "versioned": VERSIONED}
