/* cuda_consume: cuda_from_dlpack(x), the reference consumer of CUDA memory (the C twin of
 * pyref.device_from_dlpack).
 *
 * Invariants:
 *  - the import is a CudaTensor over the producer's memory that owns its managed tensor (its
 *    deleter runs once, at the import's last release: OWN-03), read on one stream, its
 *    `stream`, where the producer's work is ordered before the reads;
 *  - through a producer's exchange table (on type(x), major 1, its no-sync export set):
 *    managed_tensor_from_py_object_no_sync, then current_work_stream(kDLCUDA, id): the import
 *    reads on that stream, the producer's (XAPI-19: ask it and launch on it); NULL is the
 *    legacy default stream;
 *  - through __dlpack__: the producer is asked on ref's current stream of this thread (1, the
 *    legacy default stream, unless cuda_set_stream set another), named explicitly, never None
 *    or 0 (STR-05, STR-07, STR-08, STR-14); the producer makes it safe there (STR-01); the
 *    capsule is renamed used_* once taken (CAP-03);
 *  - only (kDLCUDA, 0) producers: another device is BufferError before anything is asked. */
#include "ref.h"

#include <string.h>

/* The import through x's table, or NULL with an exception; *used 0 when x offers none. */
static PyObject *through_table(PyObject *x, int *used) {
  ref_request r = {.xapi_check_major = 1, .xapi_check_dltensor = 1};
  PyObject *cap;
  const DLPackExchangeAPI *api = ref_offered_table(x, &r, &cap);
  *used = api && api->current_work_stream;
  if (!*used) {
    Py_XDECREF(cap);
    return NULL;
  }
  DLManagedTensorVersioned *m = NULL;
  void *work = NULL;
  int rc = api->managed_tensor_from_py_object_no_sync(x, &m);
  if (rc == 0 && m && !ref_fault_is(FAULT_CUDA_CONSUMER_IGNORES_WORK_STREAM) &&
      api->current_work_stream(kDLCUDA, 0, &work) != 0) { /* XAPI-19 */
    if (m->deleter) m->deleter(m);
    m = NULL;
    rc = -1;
  }
  Py_DECREF(cap);
  if (rc != 0 || !m) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_SystemError, "the exchange table failed without an exception "
                                         "(XAPI-14, XAPI-16)");
    return NULL;
  }
  uintptr_t stream = ref_fault_is(FAULT_CUDA_CONSUMER_IGNORES_WORK_STREAM)
                         ? ref_cuda_current_stream()
                         : work ? (uintptr_t)work : REF_CUDA_LEGACY;
  return ref_cuda_import(NULL, m, stream);
}

/* The import through x.__dlpack__(stream=ref's current stream, max_version=(1, 3)); a
 * producer older than max_version (TypeError) is asked again with the stream alone, which a
 * CUDA export still needs (VER-06, STR-01). */
static PyObject *through_dlpack(PyObject *x) {
  uintptr_t stream = ref_fault_is(FAULT_CUDA_CONSUMER_IGNORES_CONTEXT) ? REF_CUDA_LEGACY
                                                                       : ref_cuda_current_stream();
  PyObject *method = PyObject_GetAttrString(x, "__dlpack__");
  PyObject *empty = PyTuple_New(0), *cap = NULL;
  PyObject *kw = Py_BuildValue("{s:K,s:(ii)}", "stream", (unsigned long long)stream,
                               "max_version", (int)REF_SPEC_MAJOR, (int)REF_SPEC_MINOR);
  if (method && empty && kw) cap = PyObject_Call(method, empty, kw);
  Py_XDECREF(kw);
  kw = NULL;
  if (!cap && method && empty && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    kw = Py_BuildValue("{s:K}", "stream", (unsigned long long)stream);
    if (kw) cap = PyObject_Call(method, empty, kw);
    Py_XDECREF(kw);
  }
  Py_XDECREF(method);
  Py_XDECREF(empty);
  if (!cap) return NULL;
  const char *name = PyCapsule_CheckExact(cap) ? PyCapsule_GetName(cap) : NULL;
  int versioned = name && strcmp(name, "dltensor_versioned") == 0;
  void *managed = name && (versioned || strcmp(name, "dltensor") == 0)
                      ? PyCapsule_GetPointer(cap, name) : NULL;
  if (!managed) {
    PyErr_Clear();
    PyErr_Format(PyExc_BufferError, "cuda_from_dlpack: __dlpack__ gave %s, not an unused "
                 "dltensor capsule (CAP-04)", name ? name : "no capsule");
    Py_DECREF(cap);
    return NULL;
  }
  /* CAP-03: renamed before the import owns it: the capsule's destructor leaves it alone */
  int renamed = PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor");
  Py_DECREF(cap);
  if (renamed != 0) return NULL;
  return versioned ? ref_cuda_import(NULL, managed, stream) : ref_cuda_import(managed, NULL, stream);
}

PyObject *ref_cuda_from_dlpack(PyObject *module, PyObject *x) {
  (void)module;
  if (!ref_cuda_bound()) return NULL;
  PyObject *dev = PyObject_CallMethod(x, "__dlpack_device__", NULL); /* API-04 */
  if (!dev) return NULL;
  int type = -1, id = -1;
  int ok = PyTuple_Check(dev) && PyArg_ParseTuple(dev, "ii", &type, &id);
  Py_DECREF(dev);
  if (!ok) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "__dlpack_device__ must return (device_type, device_id)");
    return NULL;
  }
  if (type != kDLCUDA || id != 0)
    return PyErr_Format(PyExc_BufferError, "cuda_from_dlpack imports (kDLCUDA, 0) memory; the "
                        "producer is on (%d, %d)", type, id);
  int used;
  PyObject *res = through_table(x, &used);
  return used ? res : through_dlpack(x);
}
