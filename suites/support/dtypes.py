"""The dtype table (dlconform.targets.dtypes, shared with the target adapters) and the element
values the checks give the tensors they make.

Values are logical row-major element bytes (harness/dlconform/targets/base.py). Two patterns
exist because reproducers embed them byte for byte:
- `safe_values`: every byte has its top two bits clear, so no float format reads a NaN or an
  infinity; bool elements are 0/1 alternating.
- `distinct_values`: neighbouring bytes differ (top bit clear); bool elements are 0, 1, 0 repeating.
"""
from dlconform.targets.dtypes import (
    ARRAY_API_DTYPES, DTYPES, EXTENDED_FLOATS, FLOAT8, KINDS, STANDARD_DTYPES, SUBBYTE, VECTOR_DTYPES, itemsize,
    numel, row_major_strides)
from dlconform.kit import Unsupported

__all__ = ["ARRAY_API_DTYPES", "DTYPES", "EXTENDED_FLOATS", "FLOAT8", "KINDS", "STANDARD_DTYPES", "SUBBYTE",
           "VECTOR_DTYPES", "itemsize", "numel", "row_major_strides", "COMMON", "safe_values",
           "distinct_values", "pick", "clause_of", "IMPORT_CLAUSES", "refused_dtype", "judge_kind",
           "unseen_kinds"]

#: the dtypes a check tries first, in this order (pick())
COMMON = ("float32", "int64", "uint8", "complex64", "float16", "int8")


def safe_values(dtype, shape, seed=0):
    n = numel(shape) * itemsize(dtype)
    if dtype == "bool":
        return bytes((i + seed) % 2 for i in range(n))
    return bytes(((i + seed) * 37 + 11) & 0x3F for i in range(n))


def distinct_values(dtype, shape, seed=0):
    n = numel(shape)
    if dtype == "bool":
        return bytes((i % 3 == 1) for i in range(n))
    return bytes(((i * 37 + seed * 11 + 5) & 0x7F) for i in range(n * itemsize(dtype)))


def pick(target, wanted=COMMON):
    """The dtypes of `wanted` the target has, in that order; Unsupported when none."""
    have = set(target.dtypes())
    out = [d for d in wanted if d in have]
    if not out:
        raise Unsupported("target %s offers none of the dtypes %s" % (target.name, ", ".join(wanted)))
    return out


def clause_of(name):
    """The DT clause that fixes the (code, bits, lanes) of dtype `name`."""
    code = DTYPES[name][0]
    if name == "bool":
        return "DT-03"
    return {5: "DT-04", 4: "DT-05", 15: "DT-07", 16: "DT-07", 17: "DT-08"}.get(
        code, "DT-06" if 7 <= code <= 14 else "DT-13")


#: the clauses a consumer's import of every whole-byte dtype judges (clause_of)
IMPORT_CLAUSES = ("DT-03", "DT-04", "DT-05", "DT-06", "DT-13")


def refused_dtype(check, target, att, name, clause, seen, notes):
    """Judges a consumer's refusal (att) of a valid capsule of dtype `name` on `clause`: fail
    when unclean; warn when the library itself has the dtype (`clause` added to `seen`); else
    a note for unseen_kinds."""
    why = check.unclean(att)
    if why:
        check.record(clause, "fail", "%s refused uncleanly: %s" % (name, why))
    elif name in target.dtypes():
        seen.add(clause)
        check.warn(clause, "%s, a dtype %s has, is refused on import (%s)" % (name, target.name, att.refusal()))
    else:
        notes.setdefault(clause, "%s refused (%s)" % (name, att.refusal()))


def judge_kind(check, target, result, name, clause):
    """Records on `clause` whether the consumer's import `result` of a dtype-`name` capsule
    holds elements of its kind (b i u f c), where the adapter can tell (dtype_kind) and the
    dtype has a kind letter (codes below 7)."""
    try:
        kind = target.dtype_kind(result)
    except Exception:  # noqa: BLE001 - an adapter that cannot tell
        kind = None
    want = KINDS.get(DTYPES[name][0]) if DTYPES[name][0] < 7 else None
    if kind is not None and want is not None:
        check.equal(kind, want, clause, "%s imported as kind %r" % (name, kind))


def unseen_kinds(check, seen, notes):
    """Each clause of IMPORT_CLAUSES no import or judged refusal reached is unsupported, with the
    note refused_dtype left for it."""
    for clause in IMPORT_CLAUSES:
        if clause not in seen:
            check.record(clause, "unsupported", notes.get(clause, "no dtype of this kind imported"))
