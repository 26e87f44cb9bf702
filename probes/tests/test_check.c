/* Unit tests of probes/check: report, dtype, extent and validators. Run under ASan and
 * UBSan by `make ctest`; the last line is "N passed, N failed". */
#include "check.h"
#include "tap.h"

#include <stdlib.h>

static DLDataType dt(unsigned code, unsigned bits, unsigned lanes) {
  DLDataType d;
  d.code = (uint8_t)code;
  d.bits = (uint8_t)bits;
  d.lanes = (uint16_t)lanes;
  return d;
}

static DLTensor tensor(int32_t ndim, int64_t *shape, int64_t *strides, DLDataType d) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = NULL;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = d;
  t.shape = shape;
  t.strides = strides;
  return t;
}

static const DLDataType F32 = {kDLFloat, 32, 1};
static const DLDataType U8 = {kDLUInt, 8, 1};

/* An aligned, writable buffer for non-empty tensors. */
static _Alignas(256) unsigned char g_buf[1024];

/* ---- report ----------------------------------------------------------------------------- */

static void test_report(void) {
  dlc_report r;
  memset(&r, 0x5a, sizeof r);
  dlc_report_init(&r);
  CHECK_INT(r.count, 0);
  CHECK_INT(r.truncated, 0);
  CHECK(!dlc_report_has(&r, "LAY-01"));

  dlc_report_add(&r, "LAY-06", "strides %s at %d", "NULL", 3);
  CHECK_INT(r.count, 1);
  CHECK_STR(r.items[0].clause, "LAY-06");
  CHECK_STR(r.items[0].message, "strides NULL at 3");
  CHECK(dlc_report_has(&r, "LAY-06"));
  CHECK(!dlc_report_has(&r, "LAY-07"));

  dlc_report_add(&r, NULL, "no clause");
  CHECK_STR(r.items[1].clause, "?");
  CHECK(dlc_report_has(&r, "?"));

  /* Messages are cut, never overflowed. */
  char long_msg[400];
  memset(long_msg, 'x', sizeof long_msg - 1);
  long_msg[sizeof long_msg - 1] = 0;
  dlc_report_add(&r, "DT-01", "%s", long_msg);
  CHECK_INT(strlen(r.items[2].message), DLC_MESSAGE_LEN - 1);

  /* Saturation: count stops at the capacity, truncated records the drop. */
  while (r.count < DLC_MAX_VIOLATIONS) dlc_report_add(&r, "FLG-01", "fill");
  CHECK_INT(r.truncated, 0);
  dlc_report_add(&r, "VER-07", "dropped");
  CHECK_INT(r.count, DLC_MAX_VIOLATIONS);
  CHECK_INT(r.truncated, 1);
  CHECK(!dlc_report_has(&r, "VER-07"));
  CHECK(dlc_report_has(&r, "FLG-01"));

  dlc_report_init(&r);
  CHECK_INT(r.count, 0);
  CHECK_INT(r.truncated, 0);
}

/* ---- dtype ------------------------------------------------------------------------------ */

static void expect_dtype(int line, DLDataType d, uint32_t ma, uint32_t mi, int cls, int valid,
                         const char *clause, const char *name) {
  dlc_dtype_info i = dlc_dtype_classify(d, ma, mi);
  char what[128];
  snprintf(what, sizeof what, "classify (%u,%u,%u) @ %u.%u", d.code, d.bits, d.lanes, ma, mi);
  int ok = (int)i.cls == cls && i.valid == valid &&
           ((i.clause == NULL && clause == NULL) ||
            (i.clause && clause && strcmp(i.clause, clause) == 0)) &&
           strcmp(i.name, name) == 0;
  tap_result(ok, __FILE__, line, what);
  if (!ok)
    printf("     got cls %d valid %d clause %s name %s\n", (int)i.cls, i.valid,
           i.clause ? i.clause : "(null)", i.name);
}
#define EXPECT_DT(d, ma, mi, cls, valid, clause, name) \
  expect_dtype(__LINE__, d, ma, mi, cls, valid, clause, name)

static void test_dtype_base(void) {
  static const unsigned bits[7] = {1, 2, 4, 8, 16, 32, 64};
  static const char *const inames[7] = {"int1", "int2", "int4", "int8", "int16", "int32",
                                         "int64"};
  static const char *const unames[7] = {"uint1", "uint2", "uint4", "uint8", "uint16",
                                         "uint32", "uint64"};
  for (int k = 0; k < 7; ++k) {
    EXPECT_DT(dt(kDLInt, bits[k], 1), 1, 3, DLC_DT_INT, 1, NULL, inames[k]);
    EXPECT_DT(dt(kDLUInt, bits[k], 1), 1, 0, DLC_DT_UINT, 1, NULL, unames[k]);
  }
  EXPECT_DT(dt(kDLInt, 3, 1), 1, 3, DLC_DT_INT, 0, "DT-13", "unknown");
  EXPECT_DT(dt(kDLInt, 128, 1), 1, 3, DLC_DT_INT, 0, "DT-13", "unknown");
  EXPECT_DT(dt(kDLUInt, 0, 1), 1, 3, DLC_DT_UINT, 0, "DT-13", "unknown");

  EXPECT_DT(dt(kDLFloat, 16, 1), 1, 3, DLC_DT_FLOAT, 1, NULL, "float16");
  EXPECT_DT(dt(kDLFloat, 32, 1), 0, 6, DLC_DT_FLOAT, 1, NULL, "float32");
  EXPECT_DT(dt(kDLFloat, 64, 1), 1, 3, DLC_DT_FLOAT, 1, NULL, "float64");
  EXPECT_DT(dt(kDLFloat, 8, 1), 1, 3, DLC_DT_FLOAT, 0, "DT-13", "unknown");
  EXPECT_DT(dt(kDLFloat, 128, 1), 1, 3, DLC_DT_FLOAT, 0, "DT-13", "unknown");

  EXPECT_DT(dt(kDLBfloat, 16, 1), 1, 3, DLC_DT_BFLOAT, 1, NULL, "bfloat16");
  EXPECT_DT(dt(kDLBfloat, 32, 1), 1, 3, DLC_DT_BFLOAT, 0, "DT-05", "unknown");

  EXPECT_DT(dt(kDLOpaqueHandle, 64, 1), 1, 3, DLC_DT_OPAQUE, 1, NULL, "opaque");
  EXPECT_DT(dt(kDLOpaqueHandle, 7, 1), 1, 3, DLC_DT_OPAQUE, 1, NULL, "opaque");
  EXPECT_DT(dt(kDLOpaqueHandle, 0, 1), 1, 3, DLC_DT_OPAQUE, 0, "DT-11", "unknown");
  EXPECT_DT(dt(kDLOpaqueHandle, 64, 2), 1, 3, DLC_DT_OPAQUE, 0, "DT-10", "unknown");

  EXPECT_DT(dt(kDLComplex, 32, 1), 1, 3, DLC_DT_COMPLEX, 1, NULL, "complex32");
  EXPECT_DT(dt(kDLComplex, 64, 1), 1, 3, DLC_DT_COMPLEX, 1, NULL, "complex64");
  EXPECT_DT(dt(kDLComplex, 128, 1), 1, 3, DLC_DT_COMPLEX, 1, NULL, "complex128");
  EXPECT_DT(dt(kDLComplex, 16, 1), 1, 3, DLC_DT_COMPLEX, 0, "DT-04", "unknown");
  EXPECT_DT(dt(kDLComplex, 64, 2), 1, 3, DLC_DT_COMPLEX, 0, "DT-10", "unknown");

  EXPECT_DT(dt(kDLBool, 8, 1), 1, 3, DLC_DT_BOOL, 1, NULL, "bool");
  EXPECT_DT(dt(kDLBool, 1, 1), 1, 3, DLC_DT_BOOL, 0, "DT-03", "unknown");
  EXPECT_DT(dt(kDLBool, 8, 4), 1, 3, DLC_DT_BOOL, 0, "DT-03", "unknown");
  EXPECT_DT(dt(kDLBool, 8, 0), 1, 3, DLC_DT_BOOL, 0, "DT-10", "unknown");
}

static void test_dtype_lowp(void) {
  static const char *const names[11] = {
      "float8_e3m4",    "float8_e4m3",    "float8_e4m3b11fnuz", "float8_e4m3fn",
      "float8_e4m3fnuz", "float8_e5m2",   "float8_e5m2fnuz",    "float8_e8m0fnu",
      "float6_e2m3fn",  "float6_e3m2fn",  "float4_e2m1fn"};
  for (unsigned code = 7; code <= 17; ++code) {
    int cls = code <= 14 ? DLC_DT_FLOAT8 : code <= 16 ? DLC_DT_FLOAT6 : DLC_DT_FLOAT4;
    unsigned bits = code <= 14 ? 8 : code <= 16 ? 6 : 4;
    const char *bits_clause = code <= 14 ? "DT-06" : code <= 16 ? "DT-07" : "DT-08";
    EXPECT_DT(dt(code, bits, 1), 1, 1, cls, 1, NULL, names[code - 7]);
    EXPECT_DT(dt(code, bits, 1), 1, 3, cls, 1, NULL, names[code - 7]);
    EXPECT_DT(dt(code, bits, 1), 2, 0, cls, 1, NULL, names[code - 7]);
    EXPECT_DT(dt(code, 16, 1), 1, 3, cls, 0, bits_clause, "unknown");
    EXPECT_DT(dt(code, 16, 2), 1, 3, cls, 0, bits_clause, "unknown");
    if (code <= 14) { /* DT-06: fp8 has lanes 1; fp6 and fp4 vectors are DT-10 vectors */
      EXPECT_DT(dt(code, bits, 2), 1, 3, cls, 0, "DT-06", "unknown");
    } else {
      char vec[32];
      snprintf(vec, sizeof vec, "%sx2", names[code - 7]);
      EXPECT_DT(dt(code, bits, 2), 1, 3, cls, 1, NULL, vec);
    }
    /* Not yet defined before v1.1 (DT-01). */
    EXPECT_DT(dt(code, bits, 1), 1, 0, DLC_DT_UNKNOWN, 0, "DT-01", "unknown");
    EXPECT_DT(dt(code, bits, 1), 0, 8, DLC_DT_UNKNOWN, 0, "DT-01", "unknown");
  }
  EXPECT_DT(dt(18, 8, 1), 1, 3, DLC_DT_UNKNOWN, 0, "DT-01", "unknown");
  EXPECT_DT(dt(255, 32, 1), 1, 3, DLC_DT_UNKNOWN, 0, "DT-01", "unknown");
}

static void test_dtype_vectors(void) {
  EXPECT_DT(dt(kDLFloat, 32, 4), 1, 3, DLC_DT_FLOAT, 1, NULL, "float32x4");
  EXPECT_DT(dt(kDLFloat, 32, 2), 1, 3, DLC_DT_FLOAT, 1, NULL, "float32x2");
  EXPECT_DT(dt(kDLFloat, 16, 64), 1, 3, DLC_DT_FLOAT, 1, NULL, "float16x64");
  EXPECT_DT(dt(kDLFloat, 64, 3), 1, 3, DLC_DT_FLOAT, 1, NULL, "float64x3");
  EXPECT_DT(dt(kDLFloat, 32, 65), 1, 3, DLC_DT_FLOAT, 1, NULL, "float32xN");
  EXPECT_DT(dt(kDLFloat, 32, 65535), 1, 3, DLC_DT_FLOAT, 1, NULL, "float32xN");
  EXPECT_DT(dt(kDLFloat, 32, 0), 1, 3, DLC_DT_FLOAT, 0, "DT-10", "unknown");
  EXPECT_DT(dt(kDLInt, 8, 4), 1, 3, DLC_DT_INT, 1, NULL, "int8x4");
  EXPECT_DT(dt(kDLInt, 4, 8), 1, 3, DLC_DT_INT, 1, NULL, "int4x8");
  EXPECT_DT(dt(kDLUInt, 64, 16), 1, 3, DLC_DT_UINT, 1, NULL, "uint64x16");
  EXPECT_DT(dt(kDLUInt, 1, 100), 1, 3, DLC_DT_UINT, 1, NULL, "uint1xN");
  EXPECT_DT(dt(kDLBfloat, 16, 8), 1, 3, DLC_DT_BFLOAT, 1, NULL, "bfloat16x8");
  EXPECT_DT(dt(kDLBfloat, 16, 64), 1, 3, DLC_DT_BFLOAT, 1, NULL, "bfloat16x64");
  EXPECT_DT(dt(kDLBfloat, 16, 65), 1, 3, DLC_DT_BFLOAT, 1, NULL, "bfloat16xN");

  /* Every named lane count of every base is spelled out. */
  char want[32];
  int all = 1;
  for (unsigned lanes = 2; lanes <= 64; ++lanes) {
    snprintf(want, sizeof want, "uint16x%u", lanes);
    all = all && strcmp(dlc_dtype_classify(dt(kDLUInt, 16, lanes), 1, 3).name, want) == 0;
    snprintf(want, sizeof want, "int2x%u", lanes);
    all = all && strcmp(dlc_dtype_classify(dt(kDLInt, 2, lanes), 1, 3).name, want) == 0;
  }
  CHECK(all);
}

static void test_dtype_subbyte_itemsize(void) {
  CHECK_INT(dlc_dtype_classify(dt(kDLInt, 4, 1), 1, 3).subbyte, 1);
  CHECK_INT(dlc_dtype_classify(dt(kDLInt, 4, 2), 1, 3).subbyte, 1); /* bits % 8 != 0 */
  CHECK_INT(dlc_dtype_classify(dt(kDLInt, 8, 1), 1, 3).subbyte, 0);
  CHECK_INT(dlc_dtype_classify(dt(kDLFloat, 32, 4), 1, 3).subbyte, 0);
  CHECK_INT(dlc_dtype_classify(dt(kDLBool, 8, 1), 1, 3).subbyte, 0);
  CHECK_INT(dlc_dtype_classify(dt(kDLFloat4_e2m1fn, 4, 1), 1, 3).subbyte, 1);
  CHECK_INT(dlc_dtype_classify(dt(kDLFloat6_e2m3fn, 6, 1), 1, 3).subbyte, 1);
  CHECK_INT(dlc_dtype_classify(dt(kDLFloat8_e4m3fn, 8, 1), 1, 3).subbyte, 0);
  /* Computed from bits and lanes even for a code the version does not know. */
  CHECK_INT(dlc_dtype_classify(dt(kDLFloat4_e2m1fn, 4, 1), 1, 0).subbyte, 1);

  CHECK_INT(dlc_dtype_itemsize(F32), 4);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLFloat, 32, 4)), 16);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLComplex, 128, 1)), 16);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLInt, 4, 1)), 1);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLInt, 4, 3)), 2);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLFloat6_e2m3fn, 6, 1)), 1);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLOpaqueHandle, 255, 65535)), (255ull * 65535 + 7) / 8);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLFloat, 0, 1)), 0);
  CHECK_INT(dlc_dtype_itemsize(dt(kDLFloat, 32, 0)), 0);
}

/* ---- extent ----------------------------------------------------------------------------- */

static void test_row_major_strides(void) {
  int64_t out[4] = {-7, -7, -7, -7};
  CHECK_INT(dlc_row_major_strides(-1, NULL, out), -1);
  CHECK_INT(dlc_row_major_strides(2, NULL, out), -1);
  CHECK_INT(dlc_row_major_strides(0, NULL, out), 0);
  CHECK_INT(out[0], -7);

  int64_t s3[3] = {2, 3, 4};
  CHECK_INT(dlc_row_major_strides(3, s3, out), 0);
  CHECK(out[0] == 12 && out[1] == 4 && out[2] == 1);

  int64_t z[3] = {2, 0, 3}; /* a zero extent counts as 1 (numpy, PyTorch) */
  CHECK_INT(dlc_row_major_strides(3, z, out), 0);
  CHECK(out[0] == 3 && out[1] == 3 && out[2] == 1);

  int64_t neg[2] = {2, -1};
  CHECK_INT(dlc_row_major_strides(2, neg, out), -1);

  int64_t big[3] = {2, INT64_C(1) << 62, 4};
  CHECK_INT(dlc_row_major_strides(3, big, out), -1);

  /* The extent of dim 0 never enters a stride. */
  int64_t edge[2] = {INT64_MAX, INT64_MAX};
  CHECK_INT(dlc_row_major_strides(2, edge, out), 0);
  CHECK(out[0] == INT64_MAX && out[1] == 1);
}

static void test_extent_status(void) {
  dlc_extent e;
  DLTensor t = tensor(-1, NULL, NULL, F32);
  e = dlc_extent_of(&t);
  CHECK_INT(e.status, DLC_EXTENT_BAD_NDIM);
  CHECK_INT(e.itemsize, 4);
  CHECK(e.numel == 0 && e.lo == 0 && e.hi == 0 && e.row_major == 0 && e.zero_size == 0);

  t = tensor(2, NULL, NULL, F32);
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_NULL_SHAPE);

  int64_t neg[3] = {2, -3, 4};
  t = tensor(3, neg, NULL, F32);
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_NEG_SHAPE);

  /* Negative extents are found before zero-size and before the itemsize. */
  int64_t zneg[2] = {0, -1};
  t = tensor(2, zneg, NULL, dt(kDLFloat, 0, 1));
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_NEG_SHAPE);

  int64_t s1[1] = {4};
  t = tensor(1, s1, NULL, dt(kDLFloat, 0, 1));
  e = dlc_extent_of(&t);
  CHECK_INT(e.status, DLC_EXTENT_BAD_ITEMSIZE);
  CHECK_INT(e.itemsize, 0);
  t = tensor(1, s1, NULL, dt(kDLFloat, 32, 0));
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_BAD_ITEMSIZE);
}

static void test_extent_basic(void) {
  dlc_extent e;
  /* ndim 0: one element; a NULL shape is fine (LAY-08). */
  DLTensor t = tensor(0, NULL, NULL, dt(kDLFloat, 64, 1));
  e = dlc_extent_of(&t);
  CHECK_INT(e.status, DLC_EXTENT_OK);
  CHECK_INT(e.numel, 1);
  CHECK_INT(e.lo, 0);
  CHECK_INT(e.hi, 8);
  CHECK_INT(e.zero_size, 0);
  CHECK_INT(e.row_major, 1);

  int64_t s1[1] = {4};
  t = tensor(1, s1, NULL, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.numel == 4 && e.lo == 0 && e.hi == 16 && e.row_major);

  int64_t s2[2] = {3, 4}, st_t[2] = {1, 3}, st_c[2] = {4, 1};
  t = tensor(2, s2, st_t, F32); /* transposed */
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.numel == 12 && e.lo == 0 && e.row_major == 0);
  CHECK_INT(e.hi, (2 * 1 + 3 * 3 + 1) * 4);
  t = tensor(2, s2, st_c, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.hi == 48 && e.row_major == 1);

  int64_t sneg[1] = {-1};
  int64_t s3[1] = {3};
  t = tensor(1, s3, sneg, F32); /* reversed */
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.lo == -8 && e.hi == 4 && e.row_major == 0);

  int64_t smix[2] = {-4, 1}, s34[2] = {3, 4};
  t = tensor(2, s34, smix, U8); /* rows reversed */
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.lo == -8 && e.hi == 4 && e.numel == 12);

  int64_t s14[2] = {1, 4}, odd[2] = {99, 1}; /* extent-1 dims are ignored */
  t = tensor(2, s14, odd, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.row_major == 1 && e.hi == 16);

  int64_t bc[1] = {0}; /* broadcast */
  int64_t s4[1] = {4};
  t = tensor(1, s4, bc, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.numel == 4 && e.lo == 0 && e.hi == 4 && !e.row_major);

  /* Vector and sub-byte items use GetDataSize's rounding (LAY-10). */
  t = tensor(1, s4, NULL, dt(kDLFloat, 32, 4));
  CHECK_INT(dlc_extent_of(&t).hi, 64);
  t = tensor(1, s4, NULL, dt(kDLFloat4_e2m1fn, 4, 1));
  CHECK_INT(dlc_extent_of(&t).hi, 4);

  /* NULL strides agree with the explicit compact strides. */
  int64_t s234[3] = {2, 3, 4}, rm[3];
  CHECK_INT(dlc_row_major_strides(3, s234, rm), 0);
  t = tensor(3, s234, NULL, F32);
  dlc_extent a = dlc_extent_of(&t);
  t = tensor(3, s234, rm, F32);
  dlc_extent b = dlc_extent_of(&t);
  CHECK(a.status == 0 && b.status == 0 && a.lo == b.lo && a.hi == b.hi && a.hi == 96 &&
        a.numel == 24 && a.row_major && b.row_major);
}

static void test_extent_zero_size(void) {
  dlc_extent e;
  int64_t s[3] = {2, 0, 3};
  DLTensor t = tensor(3, s, NULL, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.zero_size == 1 && e.numel == 0 && e.lo == 0 &&
        e.hi == 0 && e.row_major == 1);

  int64_t compact[3] = {3, 3, 1}, other[3] = {0, 3, 1};
  t = tensor(3, s, compact, F32);
  CHECK_INT(dlc_extent_of(&t).row_major, 1);
  t = tensor(3, s, other, F32);
  e = dlc_extent_of(&t);
  CHECK(e.zero_size == 1 && e.row_major == 0 && e.lo == 0 && e.hi == 0);

  /* Huge extents next to a zero: no overflow, and the compact strides do not fit, so only
   * an extent-1 dim left of the overflow keeps the tensor row-major. */
  int64_t huge[4] = {3, INT64_C(1) << 62, 4, 0};
  int64_t hs[4] = {0, 4, 1, 1};
  t = tensor(4, huge, hs, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.zero_size == 1 && e.row_major == 0);
  int64_t huge1[4] = {1, INT64_C(1) << 62, 4, 0};
  t = tensor(4, huge1, hs, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.zero_size == 1 && e.row_major == 1);

  int64_t big[3] = {0, INT64_MAX, INT64_MAX};
  t = tensor(3, big, NULL, F32);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.zero_size == 1 && e.row_major == 1);
}

static void test_extent_overflow(void) {
  const int64_t P62 = INT64_C(1) << 62;
  int64_t s2[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
  DLTensor t = tensor(2, s2, NULL, U8); /* numel */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);

  int64_t s3[1] = {3}, smax[1] = {INT64_MAX};
  t = tensor(1, s3, smax, U8); /* (shape-1) * stride */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);

  int64_t s22[2] = {2, 2}, negneg[2] = {INT64_MIN, -1}, pospos[2] = {INT64_MAX, 1};
  t = tensor(2, s22, negneg, U8); /* sum of negative offsets */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);
  t = tensor(2, s22, pospos, U8); /* sum of positive offsets */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);

  int64_t s1[1] = {2}, mneg[1] = {-P62}, mpos[1] = {P62};
  t = tensor(1, s1, mneg, F32); /* lo in bytes */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);
  t = tensor(1, s1, mpos, F32); /* hi in bytes */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);
  t = tensor(1, s1, smax, U8); /* hi + itemsize */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);
  int64_t span[2] = {-P62, P62};
  t = tensor(2, s22, span, U8); /* hi - lo */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);

  /* Just inside the limits. */
  int64_t edge[1] = {INT64_MAX - 1};
  t = tensor(1, s1, edge, U8);
  dlc_extent e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.hi == INT64_MAX && e.lo == 0);
  int64_t lowedge[1] = {INT64_MIN + 2}; /* hi - lo == INT64_MAX */
  t = tensor(1, s1, lowedge, U8);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.lo == INT64_MIN + 2 && e.hi == 1);
  lowedge[0] = INT64_MIN + 1; /* hi - lo == INT64_MAX + 1 */
  CHECK_INT(dlc_extent_of(&t).status, DLC_EXTENT_OVERFLOW);
  int64_t nmax[1] = {INT64_MAX};
  t = tensor(1, nmax, NULL, U8);
  e = dlc_extent_of(&t);
  CHECK(e.status == DLC_EXTENT_OK && e.numel == (uint64_t)INT64_MAX && e.hi == INT64_MAX);
}

/* ---- devices and validators ------------------------------------------------------------- */

static void test_known_device(void) {
  int all = 1;
  for (int32_t d = -2; d <= 20; ++d) {
    int want = (d >= 1 && d <= 4) || (d >= 7 && d <= 18);
    all = all && dlc_is_known_device(d, 1, 3) == want;
  }
  CHECK(all);
  CHECK(!dlc_is_known_device(INT32_MAX, 1, 3));
  CHECK(!dlc_is_known_device(INT32_MIN, 1, 3));
  CHECK(dlc_is_known_device(kDLTrn, 1, 2));
  CHECK(dlc_is_known_device(kDLTrn, 2, 0));
  CHECK(!dlc_is_known_device(kDLTrn, 1, 1));
  CHECK(dlc_is_known_device(kDLMAIA, 1, 0));
  CHECK(!dlc_is_known_device(kDLMAIA, 0, 8));
  CHECK(dlc_is_known_device(kDLHexagon, 0, 8));
  CHECK(dlc_is_known_device(kDLCPU, 0, 1));
}

static int64_t g_shape3[3] = {2, 3, 4};
static int64_t g_strides3[3] = {12, 4, 1};

static DLTensor good_tensor(void) {
  DLTensor t = tensor(3, g_shape3, g_strides3, F32);
  t.data = g_buf;
  return t;
}

static int run_check(const DLTensor *t, dlc_capsule_kind kind, uint32_t ma, uint32_t mi,
                     int align, dlc_report *r) {
  dlc_report_init(r);
  int n = dlc_check_tensor(t, kind, ma, mi, align, r);
  if (n != r->count) printf("     check returned %d, report holds %d\n", n, r->count);
  return n;
}

static void test_check_tensor_shape(void) {
  dlc_report r;
  DLTensor t = good_tensor();
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 1, &r), 0);
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 3, 1, &r), 0);

  t.ndim = -1;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 1);
  CHECK(dlc_report_has(&r, "LAY-09"));

  t = good_tensor();
  t.shape = NULL;
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 3, 0, &r), 1);
  CHECK(dlc_report_has(&r, "LAY-09"));

  int64_t neg[3] = {-1, 3, -4};
  t = good_tensor();
  t.shape = neg;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 2);
  CHECK_STR(r.items[0].clause, "LAY-09");
  CHECK_STR(r.items[1].clause, "LAY-09");
  CHECK(strstr(r.items[1].message, "shape[2]") != NULL);

  /* LAY-08: ndim 0 with NULL shape and strides is fine in every kind and version. */
  t = tensor(0, NULL, NULL, F32);
  t.data = g_buf;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 1, &r), 0);
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 0, 1, &r), 0);

  /* LAY-06: NULL strides for ndim > 0 in versioned capsules from v1.2 only. */
  t = good_tensor();
  t.strides = NULL;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 2, 0, &r), 1);
  CHECK(dlc_report_has(&r, "LAY-06"));
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 2, 0, 0, &r), 1);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 1, 0, &r), 0);
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 3, 0, &r), 0); /* LAY-07 */

  /* Several violations at once. */
  t = tensor(2, NULL, NULL, dt(99, 8, 1));
  t.device.device_type = (DLDeviceType)5;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 4);
  CHECK(dlc_report_has(&r, "LAY-09") && dlc_report_has(&r, "LAY-06") &&
        dlc_report_has(&r, "DT-01") && dlc_report_has(&r, "DEV-01"));
}

static void test_check_tensor_dtype_device(void) {
  dlc_report r;
  DLTensor t = good_tensor();
  t.dtype = dt(kDLBfloat, 32, 1);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "DT-05");
  CHECK(strstr(r.items[0].message, "code 4, bits 32, lanes 1") != NULL);

  /* A dtype with itemsize 0 is reported once, by its dtype clause. */
  t.dtype = dt(kDLFloat, 32, 0);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "DT-10");

  t.dtype = dt(kDLFloat8_e4m3fn, 8, 1);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 0, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "DT-01");
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 1, 0, &r), 0);

  t = good_tensor();
  t.device.device_type = (DLDeviceType)0;
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 3, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "DEV-01");
  t.device.device_type = kDLTrn;
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 1, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "DEV-01");
  CHECK_INT(run_check(&t, DLC_CAPSULE_LEGACY, 1, 2, 0, &r), 0);

  static const DLDeviceType zero_id[3] = {kDLCPU, kDLCUDAHost, kDLCUDAManaged};
  for (int k = 0; k < 3; ++k) {
    t = good_tensor();
    t.device.device_type = zero_id[k];
    t.device.device_id = 1 + k;
    CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 1);
    CHECK_STR(r.items[0].clause, "DEV-02");
    t.device.device_id = 0;
    CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 0);
  }
  t = good_tensor();
  t.device.device_type = kDLCUDA;
  t.device.device_id = 3;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 0);
  t.device.device_type = kDLROCMHost;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 0);
}

static void test_check_tensor_data(void) {
  dlc_report r;
  DLTensor t = good_tensor();

  /* Non-empty tensors need data (LAY-01). */
  t.data = NULL;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "LAY-01");
  CHECK(strstr(r.items[0].message, "24 elements") != NULL);
  t = tensor(0, NULL, NULL, F32); /* a 0-d tensor has one element */
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "LAY-01");

  /* Alignment (LAY-01) only when asked. */
  t = good_tensor();
  t.data = g_buf + 4;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 0);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 1, &r), 1);
  CHECK_STR(r.items[0].clause, "LAY-01");
  CHECK(strstr(r.items[0].message, "256-byte") != NULL);

  /* Zero-size: data should be NULL (LAY-04, SHOULD), alignment is not checked. */
  int64_t zs[2] = {0, 5}, zst[2] = {5, 1};
  t = tensor(2, zs, zst, F32);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 1, &r), 0);
  t.data = g_buf + 4;
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 1, &r), 1);
  CHECK_STR(r.items[0].clause, "LAY-04");

  /* Overflowing layouts (LAY-10); data is not judged then. */
  int64_t big[2] = {INT64_C(1) << 32, INT64_C(1) << 32}, bst[2] = {INT64_C(1) << 32, 1};
  t = tensor(2, big, bst, U8);
  CHECK_INT(run_check(&t, DLC_CAPSULE_VERSIONED, 1, 3, 1, &r), 1);
  CHECK_STR(r.items[0].clause, "LAY-10");

  /* The count includes violations that no longer fit in the report. */
  dlc_report_init(&r);
  while (r.count < DLC_MAX_VIOLATIONS - 1) dlc_report_add(&r, "X", "fill");
  t = tensor(2, NULL, NULL, dt(99, 8, 1));
  CHECK_INT(dlc_check_tensor(&t, DLC_CAPSULE_VERSIONED, 1, 3, 0, &r), 3);
  CHECK_INT(r.count, DLC_MAX_VIOLATIONS);
  CHECK_INT(r.truncated, 1);
}

static void test_check_managed(void) {
  dlc_report r;
  DLManagedTensor m;
  memset(&m, 0, sizeof m);
  m.dl_tensor = good_tensor();
  m.dl_tensor.strides = NULL; /* LAY-07: fine in a legacy capsule */
  dlc_report_init(&r);
  CHECK_INT(dlc_check_managed(&m, 1, 3, &r), 0); /* OWN-01, OWN-06: NULL deleter, ctx */
  m.dl_tensor.data = g_buf + 1; /* legacy checks never ask for alignment */
  CHECK_INT(dlc_check_managed(&m, 1, 3, &r), 0);
  m.dl_tensor.device.device_id = 2;
  CHECK_INT(dlc_check_managed(&m, 1, 3, &r), 1);
  CHECK(dlc_report_has(&r, "DEV-02"));
}

static DLManagedTensorVersioned good_versioned(void) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = 1;
  m.version.minor = 3;
  m.dl_tensor = good_tensor();
  return m;
}

static int run_versioned(const DLManagedTensorVersioned *m, uint32_t ma, uint32_t mi,
                         dlc_report *r) {
  dlc_report_init(r);
  return dlc_check_versioned(m, ma, mi, r);
}

static void test_check_versioned(void) {
  dlc_report r;
  DLManagedTensorVersioned m = good_versioned();
  CHECK_INT(run_versioned(&m, 1, 3, &r), 0);
  m.version.minor = 0;
  m.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
  CHECK_INT(run_versioned(&m, 1, 0, &r), 0);

  /* VER-07 / VER-08: a foreign major stops the check before anything else is read. The
   * shape pointer is bogus on purpose: ASan would catch a read. */
  m = good_versioned();
  m.version.major = 0;
  m.flags = ~UINT64_C(0);
  m.dl_tensor.ndim = 3;
  m.dl_tensor.shape = (int64_t *)(uintptr_t)8;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 1);
  CHECK_STR(r.items[0].clause, "VER-07");
  m.version.major = 2;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 1);
  CHECK_STR(r.items[0].clause, "VER-07");

  /* VER-09: a newer minor than the spec checked against. */
  m = good_versioned();
  m.version.minor = 4;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 1);
  CHECK_STR(r.items[0].clause, "VER-09");
  m.version.minor = 0;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 0);

  /* FLG-01: undefined bits; the padded bit is undefined before v1.1. */
  m = good_versioned();
  m.flags = 1u << 3;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 1);
  CHECK_STR(r.items[0].clause, "FLG-01");
  CHECK(strstr(r.items[0].message, "0x8") != NULL);
  m.flags = UINT64_C(1) << 63;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 1);
  CHECK_STR(r.items[0].clause, "FLG-01");

  m = good_versioned();
  m.version.minor = 0;
  m.dl_tensor.dtype = dt(kDLInt, 4, 1);
  m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_INT(run_versioned(&m, 1, 0, &r), 1);
  CHECK_STR(r.items[0].clause, "FLG-01");
  CHECK_INT(run_versioned(&m, 1, 1, &r), 0);

  /* FLG-06: padded only with a sub-byte dtype. */
  m = good_versioned();
  m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 1);
  CHECK_STR(r.items[0].clause, "FLG-06");
  m.dl_tensor.dtype = dt(kDLFloat4_e2m1fn, 4, 1);
  CHECK_INT(run_versioned(&m, 1, 3, &r), 0);
  m.dl_tensor.dtype = dt(kDLFloat6_e3m2fn, 6, 1);
  CHECK_INT(run_versioned(&m, 1, 3, &r), 0);

  /* Flags and tensor violations add up; versioned rules apply to the tensor (LAY-06). */
  m = good_versioned();
  m.version.minor = 9;
  m.flags = 0xf0 | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  m.dl_tensor.strides = NULL;
  CHECK_INT(run_versioned(&m, 1, 3, &r), 4);
  CHECK(dlc_report_has(&r, "VER-09") && dlc_report_has(&r, "FLG-01") &&
        dlc_report_has(&r, "FLG-06") && dlc_report_has(&r, "LAY-06"));
}

/* The ABI facts of abi.h, restated at run time so a header swap shows up in test output. */
static void test_abi(void) {
  CHECK_INT(sizeof(DLTensor), 48);
  CHECK_INT(offsetof(DLManagedTensorVersioned, flags), 24);
  CHECK_INT(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
  CHECK_INT(sizeof(DLPackExchangeAPI), 56);
  CHECK(DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3);
}

int main(void) {
  test_report();
  test_dtype_base();
  test_dtype_lowp();
  test_dtype_vectors();
  test_dtype_subbyte_itemsize();
  test_row_major_strides();
  test_extent_status();
  test_extent_basic();
  test_extent_zero_size();
  test_extent_overflow();
  test_known_device();
  test_check_tensor_shape();
  test_check_tensor_dtype_device();
  test_check_tensor_data();
  test_check_managed();
  test_check_versioned();
  test_abi();
  return tap_finish();
}
