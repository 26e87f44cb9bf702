/* import: how the reference consumer imports a capsule or an owning managed tensor, for
 * from_dlpack (consume.c) and managed_tensor_to_py_object_no_sync (exchange_api.c).
 *
 * Invariants:
 *  - once a capsule is renamed used_* (CAP-03) the import owns the managed tensor: every
 *    path after that either hands it to the result's buffer or calls its deleter, once,
 *    skipping a NULL one (OWN-01, OWN-03);
 *  - a versioned tensor whose major is not 1 gets its deleter called and nothing else read
 *    (VER-08);
 *  - nothing is dereferenced before it is validated: dtype against the 1.3 vocabulary
 *    (VER-09), extents with dlc_extent_of (LAY-09), data NULL only when zero-size (LAY-04);
 *  - the result views the producer's memory (zero-copy) and its buffer calls the deleter
 *    when the last holder goes; copy=True copies and calls the deleter at once. */
#include "ref.h"

#include <string.h>

#define KNOWN_FLAGS                                                                    \
  (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |                     \
   DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)

static void give_back(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned) {
  if (versioned && versioned->deleter) versioned->deleter(versioned); /* OWN-01 */
  if (legacy && legacy->deleter) legacy->deleter(legacy);
}

/* Why an import is refused: a clause and a message; why is NULL when it is not. type: the
 * class raised, BufferError when NULL. */
typedef struct {
  const char *clause, *why;
  PyObject *type;
} refusal;

static const refusal ACCEPTED = {NULL, NULL, NULL};

/* Refuses the import: gives the tensor back and raises the refusal. */
static PyObject *refuse(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                        refusal no) {
  give_back(legacy, versioned);
  PyErr_Format(no.type ? no.type : PyExc_BufferError, "from_dlpack: %s (%s)", no.why, no.clause);
  return NULL;
}

/* The header: device, flags, dtype (DEV-07, VER-09, FLG-06), ndim and shape (LAY-09). */
static refusal header_refusal(const ref_import *im) {
  const DLTensor *dl = &im->dl;
  if (dl->device.device_type != kDLCPU)
    return (refusal){"DEV-07", "only kDLCPU memory can be imported", NULL};
  if (im->flags & ~(uint64_t)KNOWN_FLAGS) return (refusal){"VER-09", "unknown flag bits", NULL};
  if (!im->dtype.valid) return (refusal){"VER-09", "unknown or invalid dtype", NULL};
  if (im->dtype.cls == DLC_DT_OPAQUE && ref_fault_is(FAULT_CONSUMER_OPAQUE_SYSTEMERROR))
    return (refusal){"DT-11", "opaque handles are not supported", PyExc_SystemError};
  if (im->dtype.subbyte && !(im->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED))
    return (refusal){"FLG-06", "packed sub-byte data is not supported",
                     ref_refusal_type(REF_REFUSE_PACKED_SUBBYTE)};
  if (dl->ndim < 0 || dl->ndim > REF_MAX_NDIM)
    return (refusal){"LAY-09", "ndim out of range", NULL};
  if (dl->ndim > 0 && !dl->shape && !ref_fault_is(FAULT_CONSUMER_READS_NULL_SHAPE))
    return (refusal){"LAY-09", "NULL shape", NULL};
  return ACCEPTED;
}

/* Points the DLTensor at the import's own copies of shape and strides. */
static void own_layout(ref_import *im) {
  DLTensor *dl = &im->dl;
  size_t bytes = sizeof(int64_t) * (size_t)dl->ndim;
  if (dl->ndim > 0) memcpy(im->shape, dl->shape, bytes);
  dl->shape = im->shape;
  if (dl->strides) {
    if (dl->ndim > 0) memcpy(im->strides, dl->strides, bytes);
    dl->strides = im->strides;
  }
}

/* The layout (LAY-03, LAY-04, LAY-07, LAY-09); accepted, the bytes [*lo, *hi) the elements
 * span. NULL strides become row-major ones. */
static refusal layout_refusal(ref_import *im, uintptr_t *lo, uintptr_t *hi) {
  DLTensor *dl = &im->dl;
  for (int32_t i = 0; i < dl->ndim; i++)
    if (im->shape[i] < 0) return (refusal){"LAY-09", "negative extent", NULL};
  /* LAY-08: a 0-d tensor may have NULL strides (the fault refuses them, not 0-d tensors) */
  if (!dl->strides && dl->ndim == 0 && ref_fault_is(FAULT_CONSUMER_REJECTS_NULL_STRIDES))
    return (refusal){"LAY-08", "NULL strides of a 0-d tensor", NULL};
  if (!dl->strides && dl->ndim > 0) {
    /* LAY-07: NULL strides are compact row-major (legacy and pre-1.2); a 1.2+ producer
     * breaks LAY-06 with them, which is the producer's fault: accepted the same way. */
    if (ref_fault_is(FAULT_CONSUMER_REJECTS_NULL_STRIDES))
      return (refusal){"LAY-07", "NULL strides", NULL};
    if (dlc_row_major_strides(dl->ndim, im->shape, im->strides) != 0)
      return (refusal){"LAY-09", "shape overflows", NULL};
    dl->strides = im->strides;
  }
  dlc_extent e = dlc_extent_of(dl);
  if (e.status != DLC_EXTENT_OK) return (refusal){"LAY-09", "invalid extent", NULL};
  *lo = *hi = 0;
  if (e.zero_size) {
    if (dl->data == NULL && ref_fault_is(FAULT_CONSUMER_REJECTS_ZERO_SIZE_NULL))
      return (refusal){"LAY-04", "NULL data", NULL};
    return ACCEPTED;
  }
  if (dl->data == NULL) return (refusal){"LAY-04", "NULL data for a non-empty tensor", NULL};
  uintptr_t first;
  if (dl->byte_offset > (uint64_t)INT64_MAX ||
      __builtin_add_overflow((uintptr_t)dl->data, (uintptr_t)dl->byte_offset, &first) ||
      (uint64_t)(-e.lo) > first || __builtin_add_overflow(first, (uintptr_t)e.hi, hi))
    return (refusal){"LAY-03", "extent wraps the address space", NULL};
  *lo = first - (uintptr_t)(-e.lo);
  return ACCEPTED;
}

PyObject *ref_import_managed(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                             int copy) {
  if (versioned && versioned->version.major != REF_SPEC_MAJOR &&
      ref_refusal_type(REF_REFUSE_OTHER_MAJOR))
    return refuse(NULL, versioned,
                  (refusal){"VER-08", "unsupported DLPack major version", NULL});
  ref_import im;
  im.flags = versioned ? versioned->flags : 0;
  im.dl = versioned ? versioned->dl_tensor : legacy->dl_tensor;
  im.dtype = dlc_dtype_classify(im.dl.dtype, REF_SPEC_MAJOR, REF_SPEC_MINOR);
  ref_twist_import_header(&im);
  refusal no = header_refusal(&im);
  if (no.why) return refuse(legacy, versioned, no);
  own_layout(&im);
  ref_twist_import_layout(&im);
  uintptr_t lo, hi;
  no = layout_refusal(&im, &lo, &hi);
  if (no.why) return refuse(legacy, versioned, no);
  if (hi > lo && ref_fault_is(FAULT_CONSUMER_TOUCHES_SPAN)) (void)*(volatile const char *)(hi - 1);

  ref_buf *buf = ref_buf_foreign(legacy, versioned, lo, hi);
  if (!buf) {
    give_back(legacy, versioned);
    return PyErr_NoMemory();
  }
  ref_twist_import_owner(buf);
  const DLTensor *dl = &im.dl;
  int readonly = (im.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0; /* FLG-03 */
  RefTensor *view = ref_tensor_over(buf, dl->data, dl->byte_offset, dl->dtype, dl->ndim,
                                    im.shape, dl->strides, readonly);
  if (!view || !copy) return (PyObject *)view;
  /* copy: a compact private copy; the producer's tensor is released with the view */
  ref_buf *own = ref_copy_compact(view);
  RefTensor *out = NULL;
  if (own) out = ref_tensor_over(own, own->mem, 0, dl->dtype, dl->ndim, im.shape, NULL, 0);
  Py_DECREF(view);
  return (PyObject *)out;
}

PyObject *ref_import_versioned(DLManagedTensorVersioned *m) {
  if (!m) {
    PyErr_SetString(PyExc_ValueError, "NULL tensor");
    return NULL;
  }
  return ref_import_managed(NULL, m, 0);
}

/* 1 when a versioned tensor of our major says it is a private copy already (FLG-05); the
 * flags are read only when the major is ours (VER-08). */
int ref_import_is_copy(const DLManagedTensorVersioned *m) {
  return m->version.major == REF_SPEC_MAJOR && (m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
}

PyObject *ref_import_capsule(PyObject *cap, int copy) {
  ref_consume_rules rules = {copy, 1, 0};
  ref_twist_consume(&rules);
  const char *name = PyCapsule_GetName(cap);
  if (!name) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_BufferError, "from_dlpack: unnamed capsule");
    return NULL;
  }
  int versioned, used = 0; /* VER-05: the name says which struct */
  if (strcmp(name, "dltensor_versioned") == 0) versioned = 1;
  else if (strcmp(name, "dltensor") == 0) versioned = 0;
  else if (strcmp(name, "used_dltensor_versioned") == 0) versioned = used = 1;
  else if (strcmp(name, "used_dltensor") == 0) versioned = 0, used = 1;
  else {
    PyErr_Format(PyExc_BufferError, "from_dlpack: not a DLPack capsule: '%s'", name);
    return NULL;
  }
  if (used && ref_refuse(REF_REFUSE_USED_CAPSULE, "from_dlpack: capsule already consumed (CAP-04)") < 0)
    return NULL;
  void *p = PyCapsule_GetPointer(cap, name);
  if (!p) return NULL;
  const char *used_name = versioned ? "used_dltensor_versioned" : "used_dltensor";
  if (rules.rename && !rules.rename_late && PyCapsule_SetName(cap, used_name) < 0) return NULL;
  /* a producer's IS_COPIED copy is already private (FLG-05): no second copy */
  PyObject *res = versioned ? ref_import_managed(NULL, p, rules.copy && !ref_import_is_copy(p))
                            : ref_import_managed(p, NULL, rules.copy);
  if (res && rules.rename && rules.rename_late && PyCapsule_SetName(cap, used_name) < 0)
    Py_CLEAR(res);
  return res;
}
