/* exchange_api: the static DLPackExchangeAPI of the reference (XAPI-01..18), exposed as
 * the class attribute Tensor.__dlpack_c_exchange_api__, a PyCapsule named
 * "dlpack_exchange_api" with no destructor (the struct is static: XAPI-05).
 *
 * The allocator never touches Python: it reports failures through SetError, exactly once
 * and only when it fails (XAPI-13), and tolerates a NULL SetError. The *_py_object
 * functions are called with the GIL held and fail with a Python exception set. */
#include "ref.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* XAPI-13: a failure is reported through SetError exactly once. */
static void report(void *error_ctx, void (*SetError)(void *, const char *, const char *),
                   const char *kind, const char *message) {
  for (int i = 0; SetError && i < ref_twist_error_reports(1); i++)
    SetError(error_ctx, kind, i == 0 ? message : "second report of the same failure");
}

/* obj as an exportable ref Tensor, or NULL with TypeError (another type, XAPI-14) or
 * BufferError (data that cannot be described, XAPI-14/15) set. */
static RefTensor *exportable_tensor(PyObject *obj) {
  if (!obj || !RefTensor_Check(obj)) {
    PyErr_SetString(PyExc_TypeError, "expected a dlconform._ref.Tensor");
    return NULL;
  }
  RefTensor *t = (RefTensor *)obj;
  if (!t->exportable) {
    PyErr_SetString(PyExc_BufferError, "this tensor cannot be exported");
    return NULL;
  }
  return t;
}

int ref_xapi_allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                      void (*SetError)(void *error_ctx, const char *kind, const char *message),
                      DLDevice device, ref_buf *(*alloc)(size_t size)) {
  if (out) *out = NULL;
  if (!prototype || !out) {
    report(error_ctx, SetError, "ValueError", "NULL prototype or out");
    return -1;
  }
  if (prototype->device.device_type != device.device_type ||
      prototype->device.device_id != device.device_id) {
    if (ref_fault_is(FAULT_XAPI_ABORT_BAD_DEVICE)) abort(); /* fault: XAPI-18 */
    char message[96];
    snprintf(message, sizeof message, "this table allocates on (%d, %d) only",
             (int)device.device_type, (int)device.device_id);
    report(error_ctx, SetError, "BufferError", message);
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
  DLTensor dl = {NULL, device, prototype->ndim, prototype->dtype, prototype->shape,
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
  ref_buf *buf = alloc(e.zero_size ? 0 : (size_t)(e.hi - e.lo));
  if (!buf) {
    report(error_ctx, SetError, "MemoryError", "out of memory");
    return -1;
  }
  dl.data = (void *)buf->lo; /* NULL for zero-size (LAY-04) */
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

static int ref_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                         void (*SetError)(void *error_ctx, const char *kind,
                                          const char *message)) {
  return ref_xapi_allocate(prototype, out, error_ctx, SetError, (DLDevice){kDLCPU, 0},
                           ref_buf_alloc);
}

static int ref_managed_from_py(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *obj = py_object;
  *out = NULL;
  if (!obj || !RefTensor_Check(obj)) { /* XAPI-14: only the type the API was found on */
    if (ref_fault_is(FAULT_XAPI_FROM_PY_NO_TYPECHECK)) raise(SIGSEGV); /* fault: reads it */
    PyErr_SetString(PyExc_TypeError, "expected a dlconform._ref.Tensor");
    return -1;
  }
  RefTensor *t = (RefTensor *)obj;
  if (!t->exportable) { /* XAPI-14: data it cannot describe */
    ref_refuse(REF_REFUSE_XAPI_UNEXPORTABLE, "this tensor cannot be exported");
    return -1;
  }
  *out = ref_export_versioned_nocopy(t); /* READ_ONLY set for a read-only tensor */
  if (!*out) {
    PyErr_NoMemory();
    return -1;
  }
  ref_twist_xapi_handout(*out);
  return 0;
}

static int ref_managed_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
  *out_py_object = NULL;
  if (tensor && !(tensor = ref_twist_adopted(tensor))) return -1;
  /* steals tensor (XAPI-17): ref_import_versioned calls its deleter on failure */
  PyObject *o = ref_import_versioned(tensor);
  *out_py_object = o;
  return o ? 0 : -1;
}

static int ref_dltensor_from_py(void *py_object, DLTensor *out) {
  PyObject *obj = py_object;
  RefTensor *t = exportable_tensor(obj);
  if (!t) return -1;
  ref_tensor_fill(t, out); /* borrows the tensor's own arrays: no allocation (XAPI-15) */
  return ref_twist_borrowed(out, t->buf->lo, t->buf->hi);
}

static int ref_current_work_stream(DLDeviceType device_type, int32_t device_id,
                                   void **out_current_stream) {
  (void)device_id;
  if (out_current_stream) *out_current_stream = NULL;
  if (device_type == kDLCPU) { /* XAPI-16: CPU has no stream */
    if (out_current_stream) *out_current_stream = ref_twist_cpu_work_stream(NULL);
    return 0;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  PyErr_Format(PyExc_BufferError, "the reference has no stream for device type %d",
               (int)device_type);
  PyGILState_Release(g);
  return -1;
}

/* The clean table. Static and never written: one pointer for the life of the process
 * (XAPI-05), prev_api NULL because no older major is offered (XAPI-07), and every
 * pointer set (XAPI-08..12; XAPI-11 allows a NULL dltensor_from, ref offers it). */
static const DLPackExchangeAPI ref_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = ref_allocator,
    .managed_tensor_from_py_object_no_sync = ref_managed_from_py,
    .managed_tensor_to_py_object_no_sync = ref_managed_to_py,
    .dltensor_from_py_object_no_sync = ref_dltensor_from_py,
    .current_work_stream = ref_current_work_stream,
};

const DLPackExchangeAPI *ref_exchange_api_table(void) { return &ref_api; }

/* ---- the type attribute (XAPI-01..03) ---------------------------------------------
 * Installed by module.c on the Tensor type, and installed again whenever the active fault
 * changes (ref_exchange_api_refresh, with the GIL held): the table faults act through
 * ref_twist_api_attribute. */
static PyTypeObject *installed_type; /* set by ref_exchange_api_install */

static const char CAPSULE_NAME[] = "dlpack_exchange_api"; /* XAPI-02 */
static const char ATTR_V13[] = "__dlpack_c_exchange_api__";
static const char ATTR_V12[] = "__c_dlpack_exchange_api__";

static int install(PyTypeObject *type) {
  PyObject *dict = type->tp_dict;
  const char *attrs[2] = {ATTR_V13, ATTR_V12};
  for (int i = 0; i < 2; i++) {
    PyObject *key = PyUnicode_FromString(attrs[i]);
    if (!key) return -1;
    int has = PyDict_Contains(dict, key);
    int rc = has > 0 ? PyDict_DelItem(dict, key) : has;
    Py_DECREF(key);
    if (rc < 0) return -1;
  }
  const char *name = ATTR_V13; /* XAPI-01: on the type; no destructor: static (XAPI-05) */
  PyObject *value = PyCapsule_New((void *)&ref_api, CAPSULE_NAME, NULL);
  if (!value || ref_twist_api_attribute(&ref_api, &name, &value) < 0) return -1;
  int rc = PyDict_SetItemString(dict, name, value);
  Py_DECREF(value);
  PyType_Modified(type);
  return rc;
}

int ref_exchange_api_install(PyTypeObject *type) {
  installed_type = type;
  return install(type);
}

void ref_exchange_api_refresh(void) {
  if (!installed_type) return; /* before module init (DLCONFORM_REF_FAULT) */
  if (install(installed_type) < 0) PyErr_WriteUnraisable((PyObject *)installed_type);
}

/* ---- the uncached table (benchmarks) ------------------------------------------------
 * The same table except that managed_tensor_from_py_object_no_sync builds a fresh struct
 * per call, bypassing the tensor's cached export: it measures what the cache saves. */
static int ref_managed_from_py_uncached(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *obj = py_object;
  *out = NULL;
  RefTensor *t = exportable_tensor(obj);
  if (!t) return -1;
  *out = ref_export_versioned_fresh(t);
  if (!*out) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

PyObject *ref_uncached_api_capsule(void) {
  static DLPackExchangeAPI ref_api_uncached;
  ref_api_uncached = ref_api;
  ref_api_uncached.managed_tensor_from_py_object_no_sync = ref_managed_from_py_uncached;
  return PyCapsule_New(&ref_api_uncached, CAPSULE_NAME, NULL);
}
