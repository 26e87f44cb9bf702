/* faults_xapi: the seams of the exchange API faults (faults.h): the table the type offers,
 * how it is offered, and what its functions write. Each seam returns its clean input
 * unchanged unless the active fault is one of its own.
 *
 * Faulty tables are statics of their own, so the clean one is never written. The attribute
 * seam runs with the GIL held, whenever the active fault changes (module.c). */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

static const char CAPSULE_NAME[] = "dlpack_exchange_api";
static const char WRONG_NAME[] = "dlpack_exchange_api_v1";        /* breaks XAPI-02 */
static const char ATTR_V12[] = "__c_dlpack_exchange_api__";       /* XAPI-03: superseded */

/* xapi_prev_api_garbage (XAPI-07): a readable "older" header that claims a newer major. */
static DLPackExchangeAPIHeader junk_header = {{7, 7}, NULL};
/* The twisted copy of the table for the header and NULL-function faults. */
static DLPackExchangeAPI faulty_table;

static void free_table(PyObject *cap) { free(PyCapsule_GetPointer(cap, CAPSULE_NAME)); }

/* xapi_table_per_lookup (XAPI-05): a heap copy per lookup, freed with its capsule. */
static PyObject *fresh_table_capsule(const DLPackExchangeAPI *clean) {
  DLPackExchangeAPI *t = malloc(sizeof *t);
  if (!t) return PyErr_NoMemory();
  *t = *clean;
  PyObject *cap = PyCapsule_New(t, CAPSULE_NAME, free_table);
  if (!cap) free(t);
  return cap;
}

/* A descriptor in the type dict for the two discovery faults: mode 0 (xapi_on_instance,
 * XAPI-01) gives the capsule to instances only and itself to the type; mode 1
 * (xapi_table_per_lookup) gives a fresh table to everyone. */
typedef struct {
  PyObject_HEAD
  int mode;
  const DLPackExchangeAPI *clean;
} XapiDescr;

static PyObject *descr_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  XapiDescr *d = (XapiDescr *)self;
  if (d->mode == 1) return fresh_table_capsule(d->clean);
  if (obj == NULL || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyCapsule_New((void *)d->clean, CAPSULE_NAME, NULL);
}

static PyTypeObject XapiDescr_Type = {
    REF_TYPE_HEAD("_XapiFaultDescriptor", XapiDescr),
    .tp_descr_get = descr_get,
};

static PyObject *descr_new(const DLPackExchangeAPI *clean, int mode) {
  if (PyType_Ready(&XapiDescr_Type) < 0) return NULL;
  XapiDescr *d = PyObject_New(XapiDescr, &XapiDescr_Type);
  if (d) d->mode = mode, d->clean = clean;
  return (PyObject *)d;
}

/* The clean table with the header or a function broken (XAPI-07..10, 12). */
static PyObject *faulty_table_capsule(const DLPackExchangeAPI *clean, ref_fault_id f) {
  faulty_table = *clean;
  if (f == FAULT_XAPI_PREV_API_GARBAGE) faulty_table.header.prev_api = &junk_header;
  if (f == FAULT_XAPI_HEADER_MAJOR) faulty_table.header.version = (DLPackVersion){2, 0}; /* XAPI-06 */
  if (f == FAULT_XAPI_NULL_ALLOCATOR) faulty_table.managed_tensor_allocator = NULL;
  if (f == FAULT_XAPI_NULL_FROM_PY) faulty_table.managed_tensor_from_py_object_no_sync = NULL;
  if (f == FAULT_XAPI_NULL_TO_PY) faulty_table.managed_tensor_to_py_object_no_sync = NULL;
  if (f == FAULT_XAPI_NULL_STREAM) faulty_table.current_work_stream = NULL;
  return PyCapsule_New(&faulty_table, CAPSULE_NAME, NULL); /* no destructor: static */
}

int ref_twist_api_attribute(const DLPackExchangeAPI *clean, const char **name,
                            PyObject **value) {
  ref_fault_id f = ref_fault_current();
  PyObject *twisted;
  switch (f) {
    case FAULT_XAPI_INT_FORM: /* XAPI-03: the v1.2 form only */
      *name = ATTR_V12;
      twisted = PyLong_FromVoidPtr((void *)clean);
      break;
    case FAULT_XAPI_ON_INSTANCE: twisted = descr_new(clean, 0); break;
    case FAULT_XAPI_TABLE_PER_LOOKUP: twisted = descr_new(clean, 1); break;
    case FAULT_XAPI_CAPSULE_NAME: twisted = PyCapsule_New((void *)clean, WRONG_NAME, NULL); break;
    case FAULT_XAPI_PREV_API_GARBAGE:
    case FAULT_XAPI_HEADER_MAJOR:
    case FAULT_XAPI_NULL_ALLOCATOR:
    case FAULT_XAPI_NULL_FROM_PY:
    case FAULT_XAPI_NULL_TO_PY:
    case FAULT_XAPI_NULL_STREAM: twisted = faulty_table_capsule(clean, f); break;
    default: return 0;
  }
  Py_DECREF(*value);
  *value = twisted;
  return twisted ? 0 : -1;
}

int ref_twist_error_reports(int clean) {
  switch (ref_fault_current()) {
    case FAULT_XAPI_ALLOC_SILENT_FAILURE: return 0;  /* XAPI-13 */
    case FAULT_XAPI_ALLOC_DOUBLE_SETERROR: return 2; /* XAPI-13 */
    default: return clean;
  }
}

int ref_twist_borrowed(DLTensor *out, uintptr_t lo, uintptr_t hi) {
  if (!out->data || !ref_fault_is(FAULT_XAPI_DLTENSOR_COPIES)) return 0;
  /* xapi_dltensor_copies (XAPI-15): a temporary copy of the whole buffer (leaked), so
   * data is not the producer's */
  size_t n = (size_t)(hi - lo);
  char *copy = malloc(n ? n : 1);
  if (!copy) {
    PyErr_NoMemory();
    return -1;
  }
  memcpy(copy, (const char *)lo, n);
  out->data = copy + ((uintptr_t)out->data - lo);
  return 0;
}

void ref_twist_xapi_handout(DLManagedTensorVersioned *m) {
  /* xapi_handout_version (VER-07): the fault bypasses the cached export, so m is fresh */
  if (ref_fault_is(FAULT_XAPI_HANDOUT_VERSION)) m->version = (DLPackVersion){1, 0};
}

void *ref_twist_cpu_work_stream(void *clean) {
  /* xapi_stream_cpu_nonnull (XAPI-16): a made-up stream */
  return ref_fault_is(FAULT_XAPI_STREAM_CPU_NONNULL) ? (void *)(uintptr_t)0x5157 : clean;
}
