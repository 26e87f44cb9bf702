/* exchange_api: the static DLPackExchangeAPI of the reference (XAPI-01..18), exposed as
 * the class attribute Tensor.__dlpack_c_exchange_api__, a PyCapsule named
 * "dlpack_exchange_api" with no destructor (the struct is static: XAPI-05).
 *
 * The allocator never touches Python: it reports failures through SetError, exactly once
 * and only when it fails (XAPI-13), and tolerates a NULL SetError. The *_py_object
 * functions are called with the GIL held and fail with a Python exception set. */
#include "ref.h"

static void report(void *error_ctx, void (*SetError)(void *, const char *, const char *),
                   const char *kind, const char *message) {
  if (SetError) SetError(error_ctx, kind, message);
}

static int ref_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                         void (*SetError)(void *error_ctx, const char *kind,
                                          const char *message)) {
  if (out) *out = NULL;
  if (!prototype || !out) {
    report(error_ctx, SetError, "ValueError", "NULL prototype or out");
    return -1;
  }
  if (prototype->device.device_type != kDLCPU || prototype->device.device_id != 0) {
    report(error_ctx, SetError, "BufferError", "the reference allocates on (kDLCPU, 0) only");
    return -1;
  }
  dlc_dtype_info info = dlc_dtype_classify(prototype->dtype, REF_SPEC_MAJOR, REF_SPEC_MINOR);
  if (!info.valid) {
    report(error_ctx, SetError, "BufferError", "unknown or invalid dtype");
    return -1;
  }
  if (prototype->ndim < 0 || prototype->ndim > REF_MAX_NDIM ||
      (prototype->ndim > 0 && !prototype->shape)) {
    report(error_ctx, SetError, "ValueError", "invalid ndim or NULL shape");
    return -1;
  }
  /* only dtype, ndim, shape and device are read: strides and byte_offset are ignored */
  int64_t strides[REF_MAX_NDIM];
  DLTensor dl = {NULL, {kDLCPU, 0}, prototype->ndim, prototype->dtype, prototype->shape,
                 strides, 0};
  for (int32_t i = 0; i < dl.ndim; i++) {
    if (dl.shape[i] < 0) {
      report(error_ctx, SetError, "ValueError", "negative extent");
      return -1;
    }
  }
  if (dlc_row_major_strides(dl.ndim, dl.shape, strides) != 0) {
    report(error_ctx, SetError, "MemoryError", "shape overflows");
    return -1;
  }
  dlc_extent e = dlc_extent_of(&dl);
  if (e.status != DLC_EXTENT_OK) {
    report(error_ctx, SetError, "MemoryError", "size overflows");
    return -1;
  }
  ref_buf *buf = ref_buf_alloc(e.zero_size ? 0 : (size_t)(e.hi - e.lo));
  if (!buf) {
    report(error_ctx, SetError, "MemoryError", "out of memory");
    return -1;
  }
  dl.data = buf->mem; /* NULL for zero-size (LAY-04) */
  if (dl.ndim == 0) dl.strides = NULL;
  uint64_t flags = info.subbyte ? DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED : 0;
  DLManagedTensorVersioned *m = ref_make_versioned(buf, &dl, flags);
  ref_buf_decref(buf);
  if (!m) {
    report(error_ctx, SetError, "MemoryError", "out of memory");
    return -1;
  }
  *out = m;
  return 0;
}

static int ref_managed_from_py(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *obj = py_object;
  *out = NULL;
  if (!obj || !RefTensor_Check(obj)) { /* XAPI-14: only the type the API was found on */
    PyErr_SetString(PyExc_TypeError, "expected a dlconform._ref.Tensor");
    return -1;
  }
  RefTensor *t = (RefTensor *)obj;
  if (!t->exportable) {
    PyErr_SetString(PyExc_BufferError, "this tensor cannot be exported");
    return -1;
  }
  *out = ref_export_versioned_nocopy(t); /* READ_ONLY set for a read-only tensor */
  if (!*out) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

static int ref_managed_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
  /* steals tensor (XAPI-17): ref_import_versioned calls its deleter on failure */
  PyObject *o = ref_import_versioned(tensor);
  *out_py_object = o;
  return o ? 0 : -1;
}

static int ref_dltensor_from_py(void *py_object, DLTensor *out) {
  PyObject *obj = py_object;
  if (!obj || !RefTensor_Check(obj)) {
    PyErr_SetString(PyExc_TypeError, "expected a dlconform._ref.Tensor");
    return -1;
  }
  RefTensor *t = (RefTensor *)obj;
  if (!t->exportable) {
    PyErr_SetString(PyExc_BufferError, "this tensor cannot be exported");
    return -1;
  }
  ref_tensor_fill(t, out); /* borrows the tensor's own arrays: no allocation (XAPI-15) */
  return 0;
}

static int ref_current_work_stream(DLDeviceType device_type, int32_t device_id,
                                   void **out_current_stream) {
  (void)device_id;
  if (out_current_stream) *out_current_stream = NULL;
  if (device_type == kDLCPU) return 0; /* XAPI-16: CPU has no stream */
  PyGILState_STATE g = PyGILState_Ensure();
  PyErr_Format(PyExc_BufferError, "the reference has no stream for device type %d",
               (int)device_type);
  PyGILState_Release(g);
  return -1;
}

static DLPackExchangeAPI ref_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = ref_allocator,
    .managed_tensor_from_py_object_no_sync = ref_managed_from_py,
    .managed_tensor_to_py_object_no_sync = ref_managed_to_py,
    .dltensor_from_py_object_no_sync = ref_dltensor_from_py,
    .current_work_stream = ref_current_work_stream,
};

int ref_exchange_api_install(PyTypeObject *type) {
  PyObject *cap = PyCapsule_New(&ref_api, "dlpack_exchange_api", NULL); /* XAPI-02 */
  if (!cap) return -1;
  int rc = PyDict_SetItemString(type->tp_dict, "__dlpack_c_exchange_api__", cap); /* XAPI-01 */
  Py_DECREF(cap);
  if (rc == 0) PyType_Modified(type);
  return rc;
}
