/* check_validate: producer-side validation of DLTensor, DLManagedTensor and
 * DLManagedTensorVersioned. Every violation names the clause it breaks. */
#include "check.h"

#include <inttypes.h>

/* Appends to r and counts the violation in n, whether or not it still fits in r. */
#define DLC_ADD(...) (dlc_report_add(r, __VA_ARGS__), ++n)

static int dlc_version_at_least(uint32_t major, uint32_t minor, uint32_t want_major,
                                uint32_t want_minor) {
  return major > want_major || (major == want_major && minor >= want_minor);
}

/* DEV-01: kDLMAIA (17) dates from v1.0 and kDLTrn (18) from v1.2 (VER-09: new minors add
 * enum values); the others predate v1.0. 5 and 6 are unassigned. */
int dlc_is_known_device(int32_t device_type, uint32_t spec_major, uint32_t spec_minor) {
  if (device_type == kDLTrn) return dlc_version_at_least(spec_major, spec_minor, 1, 2);
  if (device_type == kDLMAIA) return dlc_version_at_least(spec_major, spec_minor, 1, 0);
  return device_type >= kDLCPU && device_type <= kDLHexagon && device_type != 5 &&
         device_type != 6;
}

int dlc_check_tensor(const DLTensor *t, dlc_capsule_kind kind, uint32_t spec_major,
                     uint32_t spec_minor, int check_alignment, dlc_report *r) {
  int n = 0;

  /* LAY-09: ndim >= 0 and shape holds ndim non-negative extents. LAY-08: ndim 0 may come
   * with a NULL shape. */
  if (t->ndim < 0) {
    DLC_ADD("LAY-09", "ndim is %" PRId32 ", must be >= 0", t->ndim);
  } else if (t->ndim > 0 && t->shape == NULL) {
    DLC_ADD("LAY-09", "shape is NULL with ndim %" PRId32, t->ndim);
  } else {
    for (int32_t i = 0; i < t->ndim; ++i) {
      if (t->shape[i] < 0)
        DLC_ADD("LAY-09", "shape[%" PRId32 "] is %" PRId64 ", must be >= 0", i, t->shape[i]);
    }
  }

  /* LAY-06: from v1.2 a versioned export has strides for ndim != 0. Legacy capsules keep
   * NULL-means-row-major (LAY-07). */
  if (kind == DLC_CAPSULE_VERSIONED && dlc_version_at_least(spec_major, spec_minor, 1, 2) &&
      t->ndim > 0 && t->strides == NULL)
    DLC_ADD("LAY-06", "strides is NULL with ndim %" PRId32 " (required from v1.2)", t->ndim);

  /* DT-*: the dtype is a combination the spec version defines. */
  dlc_dtype_info dt = dlc_dtype_classify(t->dtype, spec_major, spec_minor);
  if (!dt.valid)
    DLC_ADD(dt.clause, "dtype (code %u, bits %u, lanes %u) is not valid for DLPack %" PRIu32
            ".%" PRIu32, (unsigned)t->dtype.code, (unsigned)t->dtype.bits,
            (unsigned)t->dtype.lanes, spec_major, spec_minor);

  /* DEV-01, DEV-02. */
  const int32_t dev = (int32_t)t->device.device_type;
  if (!dlc_is_known_device(dev, spec_major, spec_minor)) {
    DLC_ADD("DEV-01", "device_type %" PRId32 " is not a DLDeviceType of DLPack %" PRIu32
            ".%" PRIu32, dev, spec_major, spec_minor);
  } else if ((dev == kDLCPU || dev == kDLCUDAHost || dev == kDLCUDAManaged) &&
             t->device.device_id != 0) {
    DLC_ADD("DEV-02", "device_id is %" PRId32 " for device_type %" PRId32 ", must be 0",
            t->device.device_id, dev);
  }

  /* Layout arithmetic. Bad ndim, shape and itemsize were reported above (LAY-09, DT-*);
   * what is left is overflow (LAY-10: the storage size must be representable) and the data
   * pointer: NULL for zero-size (LAY-04, a SHOULD), non-NULL otherwise (LAY-01: data points
   * to the tensor memory) and 256-byte aligned when asked (LAY-01; LAY-02 says consumers
   * must not rely on it). */
  dlc_extent e = dlc_extent_of(t);
  if (e.status == DLC_EXTENT_OVERFLOW) {
    DLC_ADD("LAY-10", "element count or byte span of the tensor does not fit in int64");
  } else if (e.status == DLC_EXTENT_OK) {
    if (e.zero_size) {
      if (t->data != NULL)
        DLC_ADD("LAY-04", "data is %p for a zero-size tensor, should be NULL", t->data);
    } else if (t->data == NULL) {
      DLC_ADD("LAY-01", "data is NULL for a tensor of %" PRIu64 " elements", e.numel);
    } else if (check_alignment && (uintptr_t)t->data % 256 != 0) {
      DLC_ADD("LAY-01", "data %p is not 256-byte aligned", t->data);
    }
  }
  return n;
}

int dlc_check_managed(const DLManagedTensor *m, uint32_t spec_major, uint32_t spec_minor,
                      dlc_report *r) {
  /* OWN-01: a NULL deleter is legal. OWN-06: manager_ctx is opaque and may be NULL. */
  return dlc_check_tensor(&m->dl_tensor, DLC_CAPSULE_LEGACY, spec_major, spec_minor, 0, r);
}

int dlc_check_versioned(const DLManagedTensorVersioned *m, uint32_t spec_major,
                        uint32_t spec_minor, dlc_report *r) {
  int n = 0;

  /* VER-07 with VER-08: on a major other than 1 only the ABI-stable prefix (VER-10) may be
   * read, so nothing past the version is checked. */
  if (m->version.major != DLPACK_MAJOR_VERSION) {
    DLC_ADD("VER-07", "version is %" PRIu32 ".%" PRIu32 ", major must be %d",
            m->version.major, m->version.minor, DLPACK_MAJOR_VERSION);
    return n;
  }
  /* VER-09: a newer minor may carry enum values this spec version cannot interpret; the
   * consumer decides whether that is an error. */
  if (m->version.minor > spec_minor)
    DLC_ADD("VER-09", "version is %" PRIu32 ".%" PRIu32 ", newer than the spec %" PRIu32
            ".%" PRIu32, m->version.major, m->version.minor, spec_major, spec_minor);

  /* FLG-01: only defined bits. IS_SUBBYTE_TYPE_PADDED exists from v1.1 (FLG-06). */
  const int padded_defined = dlc_version_at_least(spec_major, spec_minor, 1, 1);
  uint64_t defined = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
  if (padded_defined) defined |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  if (m->flags & ~defined)
    DLC_ADD("FLG-01", "flags 0x%" PRIx64 " set undefined bits 0x%" PRIx64, m->flags,
            m->flags & ~defined);

  /* FLG-06: the padded bit describes sub-byte storage only. */
  if (padded_defined && (m->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
      !dlc_dtype_classify(m->dl_tensor.dtype, spec_major, spec_minor).subbyte)
    DLC_ADD("FLG-06", "IS_SUBBYTE_TYPE_PADDED set for dtype (code %u, bits %u, lanes %u), "
            "which is not sub-byte", (unsigned)m->dl_tensor.dtype.code,
            (unsigned)m->dl_tensor.dtype.bits, (unsigned)m->dl_tensor.dtype.lanes);

  return n + dlc_check_tensor(&m->dl_tensor, DLC_CAPSULE_VERSIONED, spec_major, spec_minor, 0,
                              r);
}
