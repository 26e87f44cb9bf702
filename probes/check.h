/* check: pure-C validation of DLPack structures and overflow-safe layout arithmetic.
 *
 * No Python here. Used by the probe module, the reference producer, the fuzz targets and
 * probes/tests. Every violation carries the clause ID of suites/clauses.json it breaks.
 */
#ifndef DLCONFORM_CHECK_H
#define DLCONFORM_CHECK_H

#include <stdint.h>
#include <stddef.h>
#include <dlpack/dlpack.h>
#include "abi.h" /* static ABI asserts of dlpack.h v1.3 (VER-10) */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- violations ---------------------------------------------------------------------- */

#define DLC_MAX_VIOLATIONS 32
#define DLC_MESSAGE_LEN 160

typedef struct {
  const char *clause;            /* static string, e.g. "LAY-06" */
  char message[DLC_MESSAGE_LEN]; /* human-readable, names the offending field and value */
} dlc_violation;

typedef struct {
  int count;     /* number of entries in items (saturates at DLC_MAX_VIOLATIONS) */
  int truncated; /* 1 when more violations were found than fit */
  dlc_violation items[DLC_MAX_VIOLATIONS];
} dlc_report;

void dlc_report_init(dlc_report *r);
/* Appends a violation (printf-style message). Never overflows; sets truncated instead. */
void dlc_report_add(dlc_report *r, const char *clause, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 1 when the report has an entry for this clause. */
int dlc_report_has(const dlc_report *r, const char *clause);

/* ---- dtypes ------------------------------------------------------------------------- */

typedef enum {
  DLC_DT_UNKNOWN = 0,  /* code not in DLDataTypeCode of the spec version checked */
  DLC_DT_INT,          /* kDLInt */
  DLC_DT_UINT,         /* kDLUInt */
  DLC_DT_FLOAT,        /* kDLFloat */
  DLC_DT_OPAQUE,       /* kDLOpaqueHandle (DT-11) */
  DLC_DT_BFLOAT,       /* kDLBfloat */
  DLC_DT_COMPLEX,      /* kDLComplex */
  DLC_DT_BOOL,         /* kDLBool */
  DLC_DT_FLOAT8,       /* codes 7..14 (DT-06) */
  DLC_DT_FLOAT6,       /* codes 15, 16 (DT-07) */
  DLC_DT_FLOAT4,       /* code 17 (DT-08) */
} dlc_dtype_class;

typedef struct {
  dlc_dtype_class cls;
  int valid;            /* 1 when (code, bits, lanes) is a combination the spec defines */
  const char *clause;   /* when !valid: the clause broken (DT-01, DT-03, DT-05 ...) */
  const char *name;     /* canonical name ("float32", "bool", "float8_e4m3fn", "int4" ...)
                           or "unknown" */
  int subbyte;          /* 1 when bits*lanes < 8 or bits is not a multiple of 8 */
} dlc_dtype_info;

/* Classifies a dtype against spec version (major, minor): codes added after that version
 * are DLC_DT_UNKNOWN. Never fails. */
dlc_dtype_info dlc_dtype_classify(DLDataType dt, uint32_t spec_major, uint32_t spec_minor);

/* Names (dlc_dtype_info.name) of valid dtypes: "int1".."int64", "uint1".."uint64" (bits 1, 2,
 * 4, 8, 16, 32, 64), "float16/32/64", "bfloat16", "complex32/64/128", "bool", the fp8/fp6/fp4
 * names of dlpack.h without the kDL prefix in lower case ("float8_e4m3fn"), and "opaque" for
 * kDLOpaqueHandle whatever its bits. Vectors (lanes > 1, DT-10: int, uint, float, bfloat
 * only) append "x<lanes>" ("float32x4") for lanes 2..64 and the literal "xN" above 64
 * ("float32xN"). Invalid combinations are named "unknown". All names are static strings. */

/* Bytes per element as the header's GetDataSize rounds it: ceil(bits*lanes/8). 0 when
 * bits or lanes is 0. */
uint64_t dlc_dtype_itemsize(DLDataType dt);

/* ---- extents ------------------------------------------------------------------------ */

typedef enum {
  DLC_EXTENT_OK = 0,
  DLC_EXTENT_BAD_NDIM,      /* ndim < 0 (LAY-09) */
  DLC_EXTENT_NULL_SHAPE,    /* shape NULL with ndim > 0 (LAY-09) */
  DLC_EXTENT_NEG_SHAPE,     /* a negative extent (LAY-09) */
  DLC_EXTENT_OVERFLOW,      /* element count or byte span does not fit in int64 */
  DLC_EXTENT_BAD_ITEMSIZE,  /* bits or lanes is 0 */
} dlc_extent_status;

typedef struct {
  dlc_extent_status status;
  int zero_size;     /* 1 when some extent is 0: no element exists, lo/hi are 0 */
  uint64_t numel;    /* product of the extents (1 for ndim 0) */
  uint64_t itemsize; /* dlc_dtype_itemsize */
  /* Bytes touched, relative to (char*)data + byte_offset: every element lies in
   * [lo, hi). lo <= 0 < hi for a non-empty tensor (lo < 0 only with negative strides). */
  int64_t lo;
  int64_t hi;
  int row_major;     /* 1 when the strides equal the compact row-major strides, ignoring
                        dims of extent 1 (NULL strides count as row-major) */
} dlc_extent;

/* Computes the extent of t. NULL strides mean compact row-major (LAY-07). Never overflows:
 * arithmetic is checked and reports DLC_EXTENT_OVERFLOW. byte_offset is not added. */
dlc_extent dlc_extent_of(const DLTensor *t);

/* The status's name, as the reports, the probe module and the fuzz targets' oracle messages
 * spell it ("ok", "bad_ndim", ...): one spelling, so fuzz keys match on both sides. */
const char *dlc_extent_status_name(dlc_extent_status s);

/* Compact row-major strides (in elements) for shape; returns 0, or -1 on overflow. */
int dlc_row_major_strides(int32_t ndim, const int64_t *shape, int64_t *strides_out);

/* ---- devices ------------------------------------------------------------------------ */

/* 1 when device_type is a DLDeviceType value of spec version (major, minor) (DEV-01):
 * 1, 2, 3, 4, 7..16 always; kDLMAIA (17) from v1.0; kDLTrn (18) from v1.2. */
int dlc_is_known_device(int32_t device_type, uint32_t spec_major, uint32_t spec_minor);

/* ---- validators --------------------------------------------------------------------- */

typedef enum {
  DLC_CAPSULE_LEGACY = 0,    /* DLManagedTensor, capsule "dltensor" */
  DLC_CAPSULE_VERSIONED = 1, /* DLManagedTensorVersioned, capsule "dltensor_versioned" */
} dlc_capsule_kind;

/* Validates a DLTensor as a producer must emit it under spec version (major, minor) in a
 * capsule of this kind. Appends violations to r; returns the number appended.
 * Checks: LAY-09 (ndim, shape), LAY-06 (strides non-NULL, v1.2+, versioned only),
 * LAY-08, LAY-04 (data NULL when size 0: SHOULD), LAY-01 (256-byte alignment: recorded
 * only when check_alignment is set, since producers commonly ignore it, LAY-02),
 * DT-01/03/04/05/06/07/08/10 via dlc_dtype_classify, DEV-01 (known device type),
 * DEV-02 (device_id 0 for CPU, CUDAHost, CUDAManaged), extent overflow, and non-NULL data
 * for a non-empty tensor. */
int dlc_check_tensor(const DLTensor *t, dlc_capsule_kind kind, uint32_t spec_major,
                     uint32_t spec_minor, int check_alignment, dlc_report *r);

/* DLManagedTensor: the tensor (legacy rules) plus OWN-06 nothing, OWN-01 nothing (NULL
 * deleter is legal). */
int dlc_check_managed(const DLManagedTensor *m, uint32_t spec_major, uint32_t spec_minor,
                      dlc_report *r);

/* DLManagedTensorVersioned: VER-07 (version.major must equal 1; minor <= spec_minor is
 * expected, a larger minor is reported against VER-09 for the consumer to decide),
 * FLG-01 (only defined bits; READ_ONLY, IS_COPIED, and IS_SUBBYTE_TYPE_PADDED from v1.1),
 * FLG-06 (padded bit only with a sub-byte dtype), then the tensor (versioned rules). */
int dlc_check_versioned(const DLManagedTensorVersioned *m, uint32_t spec_major,
                        uint32_t spec_minor, dlc_report *r);

#ifdef __cplusplus
}
#endif
#endif /* DLCONFORM_CHECK_H */
