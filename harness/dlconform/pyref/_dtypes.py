"""The element types pyref stores, and their DLPack (code, bits, lanes).

Elements are native-endian (DT-02): pyref stores bytes as the machine writes them and has no
byte-swapped types. Every type is a scalar (lanes 1) of whole bytes: pyref has no sub-byte
types (fp6, fp4). Elements are storage only; pyref computes nothing with them.
"""
import collections

from ..kit.abi import DLDataTypeCode as C

DType = collections.namedtuple("DType", "name code bits lanes")
DType.itemsize = property(lambda self: self.bits * self.lanes // 8)

_ALL = (
    DType("bool", C.kDLBool, 8, 1),  # DT-03: one byte per element
    DType("int8", C.kDLInt, 8, 1),
    DType("int16", C.kDLInt, 16, 1),
    DType("int32", C.kDLInt, 32, 1),
    DType("int64", C.kDLInt, 64, 1),
    DType("uint8", C.kDLUInt, 8, 1),
    DType("uint16", C.kDLUInt, 16, 1),
    DType("uint32", C.kDLUInt, 32, 1),
    DType("uint64", C.kDLUInt, 64, 1),
    DType("float16", C.kDLFloat, 16, 1),
    DType("float32", C.kDLFloat, 32, 1),
    DType("float64", C.kDLFloat, 64, 1),
    DType("bfloat16", C.kDLBfloat, 16, 1),  # DT-05
    DType("complex64", C.kDLComplex, 64, 1),  # DT-04: bits are the full (re, im) width
    DType("complex128", C.kDLComplex, 128, 1),
    # DT-06: the fp8 formats, 8 bits and one lane each
    DType("float8_e3m4", C.kDLFloat8_e3m4, 8, 1),
    DType("float8_e4m3", C.kDLFloat8_e4m3, 8, 1),
    DType("float8_e4m3b11fnuz", C.kDLFloat8_e4m3b11fnuz, 8, 1),
    DType("float8_e4m3fn", C.kDLFloat8_e4m3fn, 8, 1),
    DType("float8_e4m3fnuz", C.kDLFloat8_e4m3fnuz, 8, 1),
    DType("float8_e5m2", C.kDLFloat8_e5m2, 8, 1),
    DType("float8_e5m2fnuz", C.kDLFloat8_e5m2fnuz, 8, 1),
    DType("float8_e8m0fnu", C.kDLFloat8_e8m0fnu, 8, 1),
)

BY_NAME = {d.name: d for d in _ALL}
BY_FIELDS = {(int(d.code), d.bits, d.lanes): d for d in _ALL}
NAMES = tuple(d.name for d in _ALL)


def dtype(name_or_dtype):
    """The DType of a name such as "float32" (or a DType); ValueError for others."""
    if isinstance(name_or_dtype, DType):
        return name_or_dtype
    try:
        return BY_NAME[name_or_dtype]
    except (KeyError, TypeError):
        raise ValueError("pyref has no dtype %r (known: %s)" % (name_or_dtype, ", ".join(NAMES))) from None
