/* faults_producer: the seams of the producer faults (faults.h): what Tensor.__dlpack__
 * reads, what a Tensor exports and reports, and what DeviceTensor does on its streams.
 * Each seam returns its clean input unchanged unless the active fault is one of its own. */
#include "ref.h"

#include <string.h>

/* ---- request ---------------------------------------------------------------------------- */

const char *ref_twist_dlpack_format(const char *clean, int *keywords) {
  switch (ref_fault_current()) {
    case FAULT_POSITIONAL_ARGS: return "|OOOO:__dlpack__"; /* API-01: positional too */
    case FAULT_NO_COPY_KEYWORD: *keywords = 3; return "|$OOO:__dlpack__"; /* API-01 */
    default: return clean;
  }
}

void ref_twist_dlpack_request(ref_dlpack_request *r) {
  switch (ref_fault_current()) {
    case FAULT_IGNORE_MAX_VERSION: r->versioned |= r->max_version_none; break; /* VER-02 */
    case FAULT_OLD_MAJOR_VERSIONED: r->versioned |= !r->max_version_none; break; /* VER-04 */
    case FAULT_COPY_IGNORED: r->copy = 0; break;                                 /* CPY-01 */
    case FAULT_COPY_FALSE_COPIES: r->copy |= r->copy_false; break;               /* CPY-02 */
    default: break;
  }
}

/* ---- export ----------------------------------------------------------------------------- */

void ref_twist_export_tensor(DLTensor *dl, int versioned, int64_t *scratch) {
  static _Alignas(REF_ALIGN) char nonnull[REF_ALIGN];
  switch (ref_fault_current()) {
    case FAULT_BYTE_STRIDES: /* LAY-05 */
      if (!dl->strides) break;
      for (int32_t i = 0; i < dl->ndim; i++)
        scratch[i] = dl->strides[i] * (int64_t)dlc_dtype_itemsize(dl->dtype);
      dl->strides = scratch;
      break;
    case FAULT_NULL_STRIDES: /* LAY-06 */
      if (versioned && dl->ndim > 0) dl->strides = NULL;
      break;
    case FAULT_ZERO_SIZE_DATA: /* LAY-04 */
      if (!dl->data) dl->data = nonnull;
      break;
    case FAULT_BOOL_BITS: /* DT-03 */
      if (dl->dtype.code == kDLBool) dl->dtype.bits = 1;
      break;
    case FAULT_FP6_BITS_8: /* DT-07 */
      if (dl->dtype.code == kDLFloat6_e2m3fn || dl->dtype.code == kDLFloat6_e3m2fn) dl->dtype.bits = 8;
      break;
    case FAULT_FP4_BITS_8: /* DT-08 */
      if (dl->dtype.code == kDLFloat4_e2m1fn) dl->dtype.bits = 8;
      break;
    case FAULT_DEVICE_MISMATCH: dl->device.device_type = kDLCUDAHost; break; /* DEV-03 */
    case FAULT_CPU_DEVICE_ID: dl->device.device_id = 1; break;               /* DEV-02 */
    default: break;
  }
}

uint64_t ref_twist_export_flags(uint64_t flags) {
  switch (ref_fault_current()) {
    case FAULT_READONLY_UNFLAGGED: return flags & ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY;
    case FAULT_UNDEFINED_FLAG: return flags | (uint64_t)1 << 7; /* FLG-01 */
    case FAULT_COPY_UNFLAGGED: return flags & ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED;
    case FAULT_SUBBYTE_UNFLAGGED: /* FLG-06 */
      return flags & ~(uint64_t)DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    default: return flags;
  }
}

DLPackVersion ref_twist_version(DLPackVersion clean) {
  return ref_fault_is(FAULT_VERSION_WRONG) ? (DLPackVersion){0, 0} : clean; /* VER-07 */
}

const char *ref_twist_capsule_name(const char *clean, int versioned) {
  if (versioned && ref_fault_is(FAULT_VERSIONED_CAPSULE_NAME)) return "dltensor-versioned";
  if (!versioned && ref_fault_is(FAULT_LEGACY_CAPSULE_NAME)) return "DLTensor";
  return clean; /* CAP-01, CAP-02 */
}

int ref_twist_destructor(int calls_deleter) {
  switch (ref_fault_current()) {
    case FAULT_DESTRUCTOR_IGNORES_USED: return 1; /* CAP-06 */
    case FAULT_DESTRUCTOR_LEAKS: return 0;        /* CAP-05 */
    default: return calls_deleter;
  }
}

void ref_twist_released_handout(int64_t *dims, size_t n) {
  /* cache_handout_unretained (OWN-05): scribbled over, as a premature free would */
  if (ref_fault_is(FAULT_CACHE_HANDOUT_UNRETAINED)) memset(dims, 0xA5, sizeof(int64_t) * n);
}

DLDevice ref_twist_tensor_device(DLDevice clean, int imported) {
  if (imported && ref_fault_is(FAULT_CONSUMER_RESULT_DEVICE)) /* API-05 */
    return (DLDevice){kDLCUDAHost, 0};
  if (ref_fault_is(FAULT_CPU_DEVICE_ID)) clean.device_id = 1; /* DEV-02 */
  return clean;
}

/* ---- vstream ---------------------------------------------------------------------------- */

long ref_twist_vstream_wait(long wait, int stream_none) {
  switch (ref_fault_current()) {
    case FAULT_VSTREAM_NONE_PER_THREAD: /* STR-04 */
      return stream_none ? REF_VSTREAM_PER_THREAD : wait;
    case FAULT_VSTREAM_LEGACY_WRONG: /* STR-05 */
      return !stream_none && wait == REF_VSTREAM_LEGACY ? REF_VSTREAM_PER_THREAD : wait;
    case FAULT_VSTREAM_PER_THREAD_WRONG: /* STR-06 */
      return wait == REF_VSTREAM_PER_THREAD ? REF_VSTREAM_LEGACY : wait;
    case FAULT_VSTREAM_HANDLE_IGNORED: /* STR-07 */
      return wait > REF_VSTREAM_PER_THREAD ? REF_VSTREAM_LEGACY : wait;
    default: return wait;
  }
}

void ref_twist_vstream_plan(ref_vstream_plan *p, long own) {
  switch (ref_fault_current()) {
    case FAULT_VSTREAM_NO_WAIT: p->wait = 0; break; /* STR-01 */
    case FAULT_VSTREAM_SYNC_ON_MINUS1: /* STR-03 */
      if (!p->to_host && p->wait == 0) p->sync = 1;
      break;
    case FAULT_VSTREAM_CPU_NO_SYNC: /* STR-12 */
      if (p->to_host) p->sync = 0;
      break;
    case FAULT_VSTREAM_COPY_ON_PRODUCER_STREAM: /* CPY-04 */
      if (!p->to_host) p->copy_on = own;
      break;
    case FAULT_VSTREAM_DESTROYS_STREAM: /* STR-11 */
      if (p->wait > REF_VSTREAM_PER_THREAD) p->destroy = p->wait;
      break;
    default: break;
  }
}
