/* faults_consumer: the seams of the consumer faults (faults.h): what from_dlpack asks a
 * producer for, and what it does with the capsule or managed tensor it receives. Each seam
 * returns its clean input unchanged unless the active fault is one of its own. */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

/* ---- asking ----------------------------------------------------------------------------- */

static int consumer_fault(ref_fault_id f) {
  return f != FAULT_NONE && strcmp(ref_fault_table[f].side, "consumer") == 0;
}

void ref_twist_request(ref_request *r) {
  ref_fault_id f = ref_fault_current();
  int other_device = r->dev_type != kDLCPU;
  int xapi_fault = f == FAULT_CONSUMER_XAPI_ON_INSTANCE || f == FAULT_CONSUMER_XAPI_IGNORES_MAJOR ||
                   f == FAULT_CONSUMER_XAPI_NULL_DLTENSOR || f == FAULT_CONSUMER_XAPI_TRUSTS_HANDOUT;
  /* consumer faults other than those of the exchange API path act on the __dlpack__ path */
  if (consumer_fault(f) && !xapi_fault) r->xapi = 0;
  switch (f) {
    case FAULT_CONSUMER_XAPI_ON_INSTANCE: r->xapi_on_instance = 1; break;
    case FAULT_CONSUMER_XAPI_IGNORES_MAJOR: r->xapi_check_major = 0; break;
    case FAULT_CONSUMER_XAPI_NULL_DLTENSOR: r->xapi_check_dltensor = 0; break;
    case FAULT_CONSUMER_STREAM_FOR_CPU: /* STR-10 */
      if (!other_device) r->stream_given = 1, r->stream = -1;
      break;
    case FAULT_CONSUMER_CUDA_STREAM_ZERO: /* STR-08 */
      if (r->dev_type == kDLCUDA && r->want_device) r->stream_given = 1, r->stream = 0;
      break;
    case FAULT_CONSUMER_ROCM_STREAM_ONE: /* STR-09 */
      if (r->dev_type == kDLROCM && r->want_device) r->stream_given = 1, r->stream = 1;
      break;
    case FAULT_CONSUMER_CPU_REQUEST_STREAM: /* STR-12 */
      if (other_device && r->want_device) r->stream_given = 1, r->stream = -1;
      break;
    case FAULT_CONSUMER_CUDA_STREAM_NONE: /* STR-14: asks a CUDA producer with stream=None */
      if (r->dev_type == kDLCUDA && !r->want_device) r->refusal = NULL;
      break;
    case FAULT_CONSUMER_FOREIGN_STREAM: /* STR-15: a stream type the spec leaves open */
      if (other_device && r->dev_type != kDLCUDA && r->dev_type != kDLROCM && !r->want_device)
        r->refusal = NULL, r->stream_given = 1, r->stream = 0;
      break;
    case FAULT_CONSUMER_FOREIGN_DEVICE_TYPEERROR: /* DEV-07 */
      if (other_device && !r->want_device)
        r->refusal = PyExc_TypeError, r->refusal_message = "from_dlpack: unsupported device";
      break;
    case FAULT_CONSUMER_REFUSES_CPU_COPY: /* DEV-06 */
      if (other_device && r->want_device)
        r->refusal = PyExc_BufferError,
        r->refusal_message = "from_dlpack: no copies from other devices";
      break;
    case FAULT_CONSUMER_COPY_IGNORED: /* CPY-06: asks for no copy */
      if (r->copy == Py_True) r->copy = Py_None;
      break;
    case FAULT_CONSUMER_COPY_FALSE_COPIES: /* CPY-07 */
      if (other_device && r->want_device && r->copy == Py_False)
        r->refusal = NULL, r->copy = Py_None;
      break;
    case FAULT_CONSUMER_DEVICE_VALUEERROR: /* CPY-08 */
      if (r->want_device) r->host_copy_refusal = PyExc_ValueError;
      break;
    case FAULT_CONSUMER_NO_RETRY: r->retry = 0; break; /* VER-06 */
    default: break;
  }
}

/* ---- import ----------------------------------------------------------------------------- */

void ref_twist_consume(ref_consume_rules *c) {
  switch (ref_fault_current()) {
    case FAULT_CONSUMER_COPY_IGNORED: c->copy = 0; break;   /* CPY-06 */
    case FAULT_CONSUMER_COPIES_ALWAYS: c->copy = 1; break;  /* SEM-01 */
    case FAULT_CONSUMER_NO_RENAME: c->rename = 0; break;    /* CAP-03 */
    case FAULT_CONSUMER_RENAMES_LATE: c->rename_late = 1; break; /* OWN-03 */
    default: break;
  }
}

void ref_twist_import_header(ref_import *im) {
  switch (ref_fault_current()) {
    case FAULT_CONSUMER_IGNORES_READONLY: /* FLG-03 */
      im->flags &= ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY;
      break;
    case FAULT_CONSUMER_ACCEPTS_UNKNOWN_DTYPE: /* VER-09: any dtype with a size */
      im->dtype.valid |= dlc_dtype_itemsize(im->dl.dtype) > 0;
      break;
    case FAULT_CONSUMER_ACCEPTS_NEGATIVE_NDIM: /* LAY-09: read as 0-d */
      if (im->dl.ndim < 0) im->dl.ndim = 0;
      break;
    default: break;
  }
}

void ref_twist_import_layout(ref_import *im) {
  DLTensor *dl = &im->dl;
  switch (ref_fault_current()) {
    case FAULT_CONSUMER_ACCEPTS_NEGATIVE_SHAPE: /* LAY-09: a negative extent reads as 0 */
      for (int32_t i = 0; i < dl->ndim; i++)
        if (im->shape[i] < 0) im->shape[i] = 0;
      break;
    case FAULT_CONSUMER_IGNORES_BYTE_OFFSET: dl->byte_offset = 0; break; /* LAY-03 */
    case FAULT_CONSUMER_IGNORES_STRIDES: /* LAY-11: read as compact row-major */
      if (dl->ndim > 0 && dlc_row_major_strides(dl->ndim, im->shape, im->strides) == 0)
        dl->strides = im->strides;
      break;
    default: break;
  }
}

void ref_twist_import_owner(ref_buf *b) {
  switch (ref_fault_current()) {
    case FAULT_CONSUMER_DOUBLE_DELETE: b->deleter_calls = 2; break;  /* OWN-03 */
    case FAULT_CONSUMER_NO_DELETE: b->deleter_calls = 0; break;      /* OWN-03 */
    case FAULT_CONSUMER_NULL_DELETER_CALL: b->null_check = 0; break; /* OWN-01 */
    case FAULT_CONSUMER_DELETE_EARLY: /* OWN-03: the result outlives the producer's memory */
      ref_buf_call_deleter(b);
      b->deleter_calls = 0;
      break;
    default: break;
  }
}

/* consumer_xapi_trusts_handout (VER-08): a hand-out of another major is read through a
 * shim stamped with our major; the shim's deleter gives the original back once. */
typedef struct {
  DLManagedTensorVersioned head;
  DLManagedTensorVersioned *original;
} handout_shim;

static void free_handout_shim(DLManagedTensorVersioned *m) {
  DLManagedTensorVersioned *original = ((handout_shim *)m)->original;
  if (original->deleter) original->deleter(original);
  free(m);
}

DLManagedTensorVersioned *ref_twist_handout(DLManagedTensorVersioned *m) {
  if (!ref_fault_is(FAULT_CONSUMER_XAPI_TRUSTS_HANDOUT) || m->version.major == REF_SPEC_MAJOR)
    return m;
  handout_shim *shim = malloc(sizeof *shim);
  if (!shim) {
    if (m->deleter) m->deleter(m);
    PyErr_NoMemory();
    return NULL;
  }
  shim->head = *m;
  shim->head.version.major = REF_SPEC_MAJOR;
  shim->head.manager_ctx = NULL;
  shim->head.deleter = free_handout_shim;
  shim->original = m;
  return &shim->head;
}

static void free_shim(DLManagedTensorVersioned *m) { free(m); }

DLManagedTensorVersioned *ref_twist_adopted(DLManagedTensorVersioned *m) {
  if (!ref_fault_is(FAULT_XAPI_TO_PY_NO_STEAL)) return m;
  /* xapi_to_py_no_steal (XAPI-17): a shim is imported instead, and m's deleter never runs */
  DLManagedTensorVersioned *shim = malloc(sizeof *shim);
  if (!shim) {
    PyErr_NoMemory();
    return NULL;
  }
  *shim = *m;
  shim->manager_ctx = NULL;
  shim->deleter = free_shim;
  return shim;
}
