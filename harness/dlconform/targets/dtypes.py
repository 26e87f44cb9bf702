"""The dtype table shared by the target adapters and the suites (suites/support re-exports it).

Names are spelled as `_ref` (dlc_dtype_classify) spells them. Sizes follow the header's
GetDataSize per element: ceil(bits * lanes / 8) bytes, so a sub-byte type padded to one byte
per element (FLG-06) has itemsize 1. Strides are in elements.
"""
from ..kit import abi

#: name -> (code, bits, lanes)
DTYPES = abi.DTYPES
#: the byte-sized standard types, in the order the adapters list them
STANDARD_DTYPES = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
    "complex32", "complex64", "complex128",
)
#: the array-API standard dtypes (DT-12)
ARRAY_API_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float32", "float64", "complex64", "complex128")
#: codes 7..14
FLOAT8 = tuple(n for n, t in DTYPES.items() if 7 <= t[0] <= 14)
#: fewer than 8 bits per element
SUBBYTE = ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int4", "uint4")
#: the float8, float6 and float4 codes (7..17) in code order: `_ref`'s types beyond the standard ones
EXTENDED_FLOATS = tuple(n for n, t in DTYPES.items() if 7 <= t[0] <= 17)
#: code -> the kind letter (numpy's dtype.kind) of the codes that name one kind of number
KINDS = {0: "i", 1: "u", 2: "f", 4: "f", 5: "c", 6: "b"}


def kind_of_code(code):
    """The kind letter (b i u f c) of a DLDataTypeCode: KINDS, and "f" for the float8/6/4 codes
    (7..17); None for any other."""
    return KINDS.get(code, "f" if 7 <= code <= 17 else None)


#: vector dtypes (DT-10): code, bits, lanes
VECTOR_DTYPES = ((2, 32, 4), (2, 16, 2), (0, 8, 4))


def by_dlpack_order(name, found):
    """Sort key of discover_dtypes() items (name, (DLPack name or None, size)): DLPack types
    in the order of STANDARD_DTYPES then DTYPES, then the library's other types by name."""
    dlpack = found[0]
    if dlpack is None:
        return (2, 0, name)
    if dlpack in STANDARD_DTYPES:
        return (0, STANDARD_DTYPES.index(dlpack), name)
    return (1, list(DTYPES).index(dlpack), name)


def itemsize(dtype):
    """Bytes per element of a name or a (code, bits, lanes) tuple: ceil(bits * lanes / 8)
    (LAY-10). KeyError for a name not in DTYPES."""
    _code, bits, lanes = DTYPES[dtype] if isinstance(dtype, str) else dtype
    return (bits * lanes + 7) // 8


def numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


#: compact C-order strides in elements; a dim of extent 0 counts as 1, so the strides of a
#: zero-size shape are those of the same shape with its zeros made ones
row_major_strides = abi.row_major
