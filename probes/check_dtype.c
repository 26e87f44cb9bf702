/* check_dtype: classification of DLDataType against a spec version, names, item sizes. */
#include "check.h"

/* Scalar bases that may form vectors (DT-10): int and uint of every valid width, the three
 * IEEE floats, bfloat16, and the sub-byte floats fp6 and fp4, whose clauses (DT-07, DT-08)
 * fix only bits: torch 2.14 exports float4_e2m1fn_x2 as (17, 4, 2). Index = position in
 * dlc_vector_base. */
#define DLC_N_VECTOR_BASES 21
#define DLC_SUBBYTE_FLOAT_BASE 18 /* float6_e2m3fn; then float6_e3m2fn, float4_e2m1fn */
#define DLC_MAX_NAMED_LANES 64

static const char *const dlc_vector_base[DLC_N_VECTOR_BASES] = {
    "int1",    "int2",    "int4",    "int8",    "int16",   "int32",    "int64",
    "uint1",   "uint2",   "uint4",   "uint8",   "uint16",  "uint32",   "uint64",
    "float16", "float32", "float64", "bfloat16", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn",
};

/* "<base>x2" .. "<base>x64" as static strings: names must outlive the by-value info. */
#define DLC_VEC(b) \
  b "x2", b "x3", b "x4", b "x5", b "x6", b "x7", b "x8", b "x9", \
  b "x10", b "x11", b "x12", b "x13", b "x14", b "x15", b "x16", b "x17", \
  b "x18", b "x19", b "x20", b "x21", b "x22", b "x23", b "x24", b "x25", \
  b "x26", b "x27", b "x28", b "x29", b "x30", b "x31", b "x32", b "x33", \
  b "x34", b "x35", b "x36", b "x37", b "x38", b "x39", b "x40", b "x41", \
  b "x42", b "x43", b "x44", b "x45", b "x46", b "x47", b "x48", b "x49", \
  b "x50", b "x51", b "x52", b "x53", b "x54", b "x55", b "x56", b "x57", \
  b "x58", b "x59", b "x60", b "x61", b "x62", b "x63", b "x64"

static const char *const dlc_vector_names[DLC_N_VECTOR_BASES][DLC_MAX_NAMED_LANES - 1] = {
    {DLC_VEC("int1")},    {DLC_VEC("int2")},    {DLC_VEC("int4")},   {DLC_VEC("int8")},
    {DLC_VEC("int16")},   {DLC_VEC("int32")},   {DLC_VEC("int64")},  {DLC_VEC("uint1")},
    {DLC_VEC("uint2")},   {DLC_VEC("uint4")},   {DLC_VEC("uint8")},  {DLC_VEC("uint16")},
    {DLC_VEC("uint32")},  {DLC_VEC("uint64")},  {DLC_VEC("float16")}, {DLC_VEC("float32")},
    {DLC_VEC("float64")}, {DLC_VEC("bfloat16")}, {DLC_VEC("float6_e2m3fn")},
    {DLC_VEC("float6_e3m2fn")}, {DLC_VEC("float4_e2m1fn")},
};

/* More than DLC_MAX_NAMED_LANES lanes: the lane count is not spelled out. */
static const char *const dlc_vector_names_n[DLC_N_VECTOR_BASES] = {
    "int1xN",    "int2xN",    "int4xN",    "int8xN",    "int16xN",   "int32xN",    "int64xN",
    "uint1xN",   "uint2xN",   "uint4xN",   "uint8xN",   "uint16xN",  "uint32xN",   "uint64xN",
    "float16xN", "float32xN", "float64xN", "bfloat16xN", "float6_e2m3fnxN", "float6_e3m2fnxN",
    "float4_e2m1fnxN",
};

static const uint8_t dlc_int_bits[7] = {1, 2, 4, 8, 16, 32, 64};
static const uint8_t dlc_float_bits[3] = {16, 32, 64};
static const uint8_t dlc_complex_bits[3] = {32, 64, 128};
static const char *const dlc_complex_names[3] = {"complex32", "complex64", "complex128"};

/* Codes 7..17, added in v1.1 (DT-06, DT-07, DT-08), in code order. */
static const char *const dlc_lowp_names[11] = {
    "float8_e3m4",    "float8_e4m3",     "float8_e4m3b11fnuz", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2",    "float8_e5m2fnuz",    "float8_e8m0fnu",
    "float6_e2m3fn",  "float6_e3m2fn",   "float4_e2m1fn",
};

/* Index of bits in table[0..n), or -1. */
static int dlc_find_bits(const uint8_t *table, int n, unsigned bits) {
  for (int i = 0; i < n; ++i) {
    if (table[i] == bits) return i;
  }
  return -1;
}

static int dlc_at_least(uint32_t major, uint32_t minor, uint32_t want_major,
                        uint32_t want_minor) {
  return major > want_major || (major == want_major && minor >= want_minor);
}

/* Rules, checked in this order; the first broken one is the reported clause:
 *   1. code is a DLDataTypeCode of the spec version: 0..6 always, 7..17 from v1.1 (DT-01);
 *   2. lanes >= 1 (DT-10);
 *   3. bits fit the code: int/uint 1,2,4,8,16,32,64 and float 16,32,64 (DT-13), bfloat 16
 *      (DT-05), complex 32,64,128 (DT-04), bool 8 (DT-03), opaque >= 1 (DT-11), fp8 8
 *      (DT-06), fp6 6 (DT-07), fp4 4 (DT-08);
 *   4. lanes > 1 only for int, uint, float, bfloat, fp6 and fp4 (DT-10); bool (DT-03) and
 *      fp8 (DT-06) name lanes 1 in their own clause, complex and opaque name no vectors. */
dlc_dtype_info dlc_dtype_classify(DLDataType dt, uint32_t spec_major, uint32_t spec_minor) {
  const unsigned code = dt.code, bits = dt.bits, lanes = dt.lanes;
  dlc_dtype_info info;
  info.cls = DLC_DT_UNKNOWN;
  info.valid = 0;
  info.clause = "DT-01";
  info.name = "unknown";
  info.subbyte = bits * lanes < 8 || bits % 8 != 0;

  const char *scalar = NULL;     /* the scalar name when bits fit the code, else NULL */
  int base = -1;                 /* index into dlc_vector_base for vector-capable codes */
  const char *bits_clause;       /* clause of rule 3 */
  const char *lanes_clause = "DT-10"; /* clause of rule 4 */
  int i;

  switch (code) {
    case kDLInt:
    case kDLUInt:
      info.cls = code == kDLInt ? DLC_DT_INT : DLC_DT_UINT;
      i = dlc_find_bits(dlc_int_bits, 7, bits);
      if (i >= 0) base = (code == kDLUInt ? 7 : 0) + i;
      bits_clause = "DT-13";
      break;
    case kDLFloat:
      info.cls = DLC_DT_FLOAT;
      i = dlc_find_bits(dlc_float_bits, 3, bits);
      if (i >= 0) base = 14 + i;
      bits_clause = "DT-13";
      break;
    case kDLBfloat:
      info.cls = DLC_DT_BFLOAT;
      if (bits == 16) base = 17;
      bits_clause = "DT-05";
      break;
    case kDLOpaqueHandle:
      info.cls = DLC_DT_OPAQUE;
      if (bits >= 1) scalar = "opaque";
      bits_clause = "DT-11";
      break;
    case kDLComplex:
      info.cls = DLC_DT_COMPLEX;
      i = dlc_find_bits(dlc_complex_bits, 3, bits);
      if (i >= 0) scalar = dlc_complex_names[i];
      bits_clause = "DT-04";
      break;
    case kDLBool:
      info.cls = DLC_DT_BOOL;
      if (bits == 8) scalar = "bool";
      bits_clause = lanes_clause = "DT-03";
      break;
    default: {
      if (code > kDLFloat4_e2m1fn || !dlc_at_least(spec_major, spec_minor, 1, 1)) return info;
      unsigned want;
      if (code <= kDLFloat8_e8m0fnu) {
        info.cls = DLC_DT_FLOAT8;
        want = 8;
        bits_clause = lanes_clause = "DT-06";
      } else if (code <= kDLFloat6_e3m2fn) {
        info.cls = DLC_DT_FLOAT6;
        want = 6;
        bits_clause = "DT-07";
      } else {
        info.cls = DLC_DT_FLOAT4;
        want = 4;
        bits_clause = "DT-08";
      }
      if (bits == want) scalar = dlc_lowp_names[code - kDLFloat8_e3m4];
      if (bits == want && code >= kDLFloat6_e2m3fn)
        base = DLC_SUBBYTE_FLOAT_BASE + (int)(code - kDLFloat6_e2m3fn);
      break;
    }
  }
  if (base >= 0) scalar = dlc_vector_base[base];

  if (lanes == 0) {
    info.clause = "DT-10";
    return info;
  }
  if (scalar == NULL) {
    info.clause = bits_clause;
    return info;
  }
  if (lanes > 1) {
    if (base < 0) {
      info.clause = lanes_clause;
      return info;
    }
    scalar = lanes <= DLC_MAX_NAMED_LANES ? dlc_vector_names[base][lanes - 2]
                                          : dlc_vector_names_n[base];
  }
  info.valid = 1;
  info.clause = NULL;
  info.name = scalar;
  return info;
}

/* GetDataSize's per-element rounding (LAY-10): ceil(bits * lanes / 8). For packed sub-byte
 * types this overstates the storage of a tensor; see dlc_extent_of. */
uint64_t dlc_dtype_itemsize(DLDataType dt) {
  return ((uint64_t)dt.bits * dt.lanes + 7) / 8;
}
