/* exchange_api: the static DLPackExchangeAPI of the reference (XAPI-01..18), exposed as
 * the class attribute Tensor.__dlpack_c_exchange_api__, a PyCapsule named
 * "dlpack_exchange_api" with no destructor (the struct is static: XAPI-05).
 *
 * The allocator never touches Python: it reports failures through SetError, exactly once
 * and only when it fails (XAPI-13), and tolerates a NULL SetError. The *_py_object
 * functions are called with the GIL held and fail with a Python exception set. */
#include "ref.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void report(void *error_ctx, void (*SetError)(void *, const char *, const char *),
                   const char *kind, const char *message) {
  if (ref_fault_is(FAULT_XAPI_ALLOC_SILENT_FAILURE)) return; /* fault: XAPI-13 */
  if (SetError) SetError(error_ctx, kind, message);
  if (SetError && ref_fault_is(FAULT_XAPI_ALLOC_DOUBLE_SETERROR)) /* fault: XAPI-13 */
    SetError(error_ctx, kind, "second report of the same failure");
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

static int ref_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                         void (*SetError)(void *error_ctx, const char *kind,
                                          const char *message)) {
  if (out) *out = NULL;
  if (!prototype || !out) {
    report(error_ctx, SetError, "ValueError", "NULL prototype or out");
    return -1;
  }
  if (prototype->device.device_type != kDLCPU || prototype->device.device_id != 0) {
    if (ref_fault_is(FAULT_XAPI_ABORT_BAD_DEVICE)) abort(); /* fault: XAPI-18 */
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
    if (ref_fault_is(FAULT_XAPI_FROM_PY_NO_TYPECHECK)) raise(SIGSEGV); /* fault: reads it */
    PyErr_SetString(PyExc_TypeError, "expected a dlconform._ref.Tensor");
    return -1;
  }
  RefTensor *t = (RefTensor *)obj;
  if (!t->exportable) { /* XAPI-14: BufferError when the data cannot be described */
    PyErr_SetString(ref_fault_is(FAULT_XAPI_FROM_PY_RUNTIMEERROR) ? PyExc_RuntimeError
                                                                  : PyExc_BufferError,
                    "this tensor cannot be exported");
    return -1;
  }
  *out = ref_export_versioned_nocopy(t); /* READ_ONLY set for a read-only tensor */
  if (!*out) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

/* fault xapi_to_py_no_steal: the import goes through a shim that never calls the
 * original's deleter (XAPI-17 broken: the caller's tensor leaks). */
static void shim_free(DLManagedTensorVersioned *m) { free(m); }

static int ref_managed_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
  if (tensor && ref_fault_is(FAULT_XAPI_TO_PY_NO_STEAL)) {
    DLManagedTensorVersioned *shim = malloc(sizeof *shim);
    if (!shim) {
      *out_py_object = NULL;
      PyErr_NoMemory();
      return -1;
    }
    *shim = *tensor;
    shim->manager_ctx = NULL;
    shim->deleter = shim_free;
    tensor = shim;
  }
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
  if (out->data && ref_fault_is(FAULT_XAPI_DLTENSOR_COPIES)) {
    /* fault: a temporary copy of the whole buffer (leaked), so data is not the producer's */
    size_t n = (size_t)(t->buf->hi - t->buf->lo);
    char *copy = malloc(n ? n : 1);
    if (!copy) {
      PyErr_NoMemory();
      return -1;
    }
    memcpy(copy, (const char *)t->buf->lo, n);
    out->data = copy + ((uintptr_t)out->data - t->buf->lo);
  }
  return 0;
}

static int ref_current_work_stream(DLDeviceType device_type, int32_t device_id,
                                   void **out_current_stream) {
  (void)device_id;
  if (out_current_stream) *out_current_stream = NULL;
  if (device_type == kDLCPU) { /* XAPI-16: CPU has no stream */
    if (out_current_stream && ref_fault_is(FAULT_XAPI_STREAM_CPU_NONNULL))
      *out_current_stream = (void *)(uintptr_t)0x5157; /* fault: a made-up stream */
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

/* ---- faults that change the table or how it is found ------------------------------
 * The type's attribute is re-installed whenever the fault changes (ref_fault_set_name
 * calls ref_exchange_api_refresh with the GIL held). Faulty tables are separate statics,
 * so the clean one is never written. */
static DLPackExchangeAPI fault_api;
/* fault xapi_prev_api_garbage: a readable "older" header that claims a newer major. */
static DLPackExchangeAPIHeader junk_header = {{7, 7}, NULL};
static PyTypeObject *installed_type; /* set by ref_exchange_api_install */

static const char CAPSULE_NAME[] = "dlpack_exchange_api"; /* XAPI-02 */
static const char WRONG_NAME[] = "dlpack_exchange_api_v1";
static const char ATTR_V13[] = "__dlpack_c_exchange_api__";
static const char ATTR_V12[] = "__c_dlpack_exchange_api__";

static void free_table(PyObject *cap) {
  free(PyCapsule_GetPointer(cap, CAPSULE_NAME));
}

/* fault xapi_table_per_lookup: a heap copy per lookup, freed with its capsule. */
static PyObject *fresh_table_capsule(void) {
  DLPackExchangeAPI *t = malloc(sizeof *t);
  if (!t) return PyErr_NoMemory();
  *t = ref_api;
  PyObject *cap = PyCapsule_New(t, CAPSULE_NAME, free_table);
  if (!cap) free(t);
  return cap;
}

/* A descriptor in the type dict for the two discovery faults: mode 0 (xapi_on_instance)
 * gives the capsule to instances only and itself to the type; mode 1
 * (xapi_table_per_lookup) gives a fresh table to everyone. */
typedef struct {
  PyObject_HEAD
  int mode;
} XapiDescr;

static PyObject *descr_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (((XapiDescr *)self)->mode == 1) return fresh_table_capsule();
  if (obj == NULL || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyCapsule_New((void *)&ref_api, CAPSULE_NAME, NULL);
}

static PyTypeObject XapiDescr_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dlconform._ref._XapiFaultDescriptor",
    .tp_basicsize = sizeof(XapiDescr),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_descr_get = descr_get,
};

static PyObject *descr_new(int mode) {
  if (PyType_Ready(&XapiDescr_Type) < 0) return NULL;
  XapiDescr *d = PyObject_New(XapiDescr, &XapiDescr_Type);
  if (d) d->mode = mode;
  return (PyObject *)d;
}

/* The value of the v1.3 attribute for the active fault (new reference), or NULL with
 * *v12 set for the int-only fault. */
static PyObject *attribute_value(PyObject **v12) {
  *v12 = NULL;
  if (ref_fault_is(FAULT_XAPI_INT_FORM)) {
    *v12 = PyLong_FromVoidPtr((void *)&ref_api); /* XAPI-03: the v1.2 form only */
    return NULL;
  }
  if (ref_fault_is(FAULT_XAPI_ON_INSTANCE)) return descr_new(0);
  if (ref_fault_is(FAULT_XAPI_TABLE_PER_LOOKUP)) return descr_new(1);
  if (ref_fault_is(FAULT_XAPI_CAPSULE_NAME))
    return PyCapsule_New((void *)&ref_api, WRONG_NAME, NULL);
  const DLPackExchangeAPI *table = &ref_api;
  if (ref_fault_is(FAULT_XAPI_PREV_API_GARBAGE) || ref_fault_is(FAULT_XAPI_NULL_ALLOCATOR) ||
      ref_fault_is(FAULT_XAPI_NULL_FROM_PY) || ref_fault_is(FAULT_XAPI_NULL_TO_PY) ||
      ref_fault_is(FAULT_XAPI_NULL_STREAM)) {
    fault_api = ref_api;
    if (ref_fault_is(FAULT_XAPI_PREV_API_GARBAGE)) fault_api.header.prev_api = &junk_header;
    if (ref_fault_is(FAULT_XAPI_NULL_ALLOCATOR)) fault_api.managed_tensor_allocator = NULL;
    if (ref_fault_is(FAULT_XAPI_NULL_FROM_PY))
      fault_api.managed_tensor_from_py_object_no_sync = NULL;
    if (ref_fault_is(FAULT_XAPI_NULL_TO_PY)) fault_api.managed_tensor_to_py_object_no_sync = NULL;
    if (ref_fault_is(FAULT_XAPI_NULL_STREAM)) fault_api.current_work_stream = NULL;
    table = &fault_api;
  }
  return PyCapsule_New((void *)table, CAPSULE_NAME, NULL); /* no destructor: static */
}

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
  PyObject *v12;
  PyObject *v13 = attribute_value(&v12);
  PyObject *v = v13 ? v13 : v12;
  if (!v) return -1;
  int rc = PyDict_SetItemString(dict, v13 ? ATTR_V13 : ATTR_V12, v); /* XAPI-01 */
  Py_DECREF(v);
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
 * per call, bypassing the tensor's cached export: it measures what the cache saves. The
 * fresh struct carries what the cached one would (same flags, the active export faults). */
static int ref_managed_from_py_uncached(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *obj = py_object;
  *out = NULL;
  RefTensor *t = exportable_tensor(obj);
  if (!t) return -1;
  if (ref_fault_table[ref_fault_current()].changes_export) {
    *out = ref_export_versioned_nocopy(t); /* already fresh while such a fault is active */
  } else {
    DLTensor dl;
    ref_tensor_fill(t, &dl);
    *out = ref_make_versioned(t->buf, &dl, ref_export_flags(t));
  }
  if (!*out) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

static DLPackExchangeAPI ref_api_uncached = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = ref_allocator,
    .managed_tensor_from_py_object_no_sync = ref_managed_from_py_uncached,
    .managed_tensor_to_py_object_no_sync = ref_managed_to_py,
    .dltensor_from_py_object_no_sync = ref_dltensor_from_py,
    .current_work_stream = ref_current_work_stream,
};

PyObject *ref_uncached_api_capsule(void) {
  return PyCapsule_New(&ref_api_uncached, "dlpack_exchange_api", NULL);
}
