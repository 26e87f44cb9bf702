/* cuda_consume: cuda_from_dlpack(x, *, device=None, copy=None), the reference consumer of
 * CUDA memory (the C twin of pyref.device_from_dlpack).
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
 *  - the array API's keywords: device None, "cuda" or (kDLCUDA, 0) keeps the data on the GPU
 *    (API-05), and only (kDLCUDA, 0) producers have it there: another device is BufferError
 *    before anything is asked; "cpu" or (kDLCPU, 0) asks any producer for a host copy
 *    (dl_device=(kDLCPU, 0), stream None: STR-12, DEV-06) imported as host memory, never with
 *    copy=False (CPY-07); a producer older than those keywords (TypeError, VER-06) is asked
 *    again without them: a (kDLCUDA, 0) export is copied to the host by ref, a host one
 *    imported, another device's is BufferError;
 *    any other device is BufferError (CPY-08). copy=True is passed on, and an
 *    export that is not IS_COPIED is copied by ref on the reading stream (CPY-06, FLG-05);
 *    copy=False is passed on and never copies (a layout ref would have to copy is refused). */
#include "ref.h"

#include <string.h>

/* The import through x's table, or NULL with an exception; *used 0 when x offers none.
 * *is_copy: 1 when the hand-out says it is a copy (FLG-05). */
static PyObject *through_table(PyObject *x, int *used, int *is_copy) {
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
  *is_copy = ref_import_is_copy(m);
  uintptr_t stream = ref_fault_is(FAULT_CUDA_CONSUMER_IGNORES_WORK_STREAM)
                         ? ref_cuda_current_stream()
                         : work ? (uintptr_t)work : REF_CUDA_LEGACY;
  return ref_cuda_import(NULL, m, stream);
}

/* The import through x.__dlpack__(stream=ref's current stream, max_version=(1, 3), copy
 * when not None); a producer older than those keywords (TypeError) is asked again with the
 * stream alone, which a CUDA export still needs (VER-06, STR-01). *is_copy: 1 when the
 * producer says the export is a copy (IS_COPIED of a versioned capsule of our major). */
static PyObject *through_dlpack(PyObject *x, PyObject *copy, int *is_copy) {
  uintptr_t stream = ref_fault_is(FAULT_CUDA_CONSUMER_IGNORES_CONTEXT) ? REF_CUDA_LEGACY
                                                                       : ref_cuda_current_stream();
  PyObject *method = PyObject_GetAttrString(x, "__dlpack__");
  PyObject *empty = PyTuple_New(0), *cap = NULL;
  PyObject *kw = Py_BuildValue("{s:K,s:(ii)}", "stream", (unsigned long long)stream,
                               "max_version", (int)REF_SPEC_MAJOR, (int)REF_SPEC_MINOR);
  if (kw && copy != Py_None && PyDict_SetItemString(kw, "copy", copy) < 0) Py_CLEAR(kw);
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
  *is_copy = versioned && ref_import_is_copy(managed);
  return versioned ? ref_cuda_import(NULL, managed, stream) : ref_cuda_import(managed, NULL, stream);
}

/* t's elements copied to dst (device memory for REF_CUDA_D2D, host memory for REF_CUDA_D2H)
 * on t's stream, its reading stream, and waited for: the copy reads the producer's memory
 * only where the import's reads are ordered. 0, or -1 with RuntimeError. */
static int copy_elements(const RefCudaTensor *t, void *dst, int kind) {
  if (!t->nbytes) return 0;
  if (ref_cuda_check(ref_cuda.MemcpyAsync(dst, (void *)t->buf->lo, (size_t)t->nbytes, kind,
                                          (void *)t->stream), "cudaMemcpyAsync") < 0)
    return -1;
  return ref_cuda_check(ref_cuda.StreamSynchronize((void *)t->stream), "cudaStreamSynchronize");
}

/* A CudaTensor of the import's elements in new device memory; the import (stolen) is
 * released once its stream has run the copy, so the producer's memory goes back only when
 * ref is done reading it (OWN-03, CPY-06). */
static PyObject *device_copy(PyObject *imported) {
  RefCudaTensor *t = (RefCudaTensor *)imported;
  ref_buf *mem = ref_cuda_buf_alloc((size_t)t->nbytes);
  PyObject *out = NULL;
  if (!mem)
    PyErr_SetString(PyExc_MemoryError, "cudaMalloc failed");
  else if (copy_elements(t, (void *)mem->lo, REF_CUDA_D2D) < 0)
    ref_buf_decref(mem);
  else
    out = (PyObject *)ref_cuda_tensor_over(mem, t->dtype, t->ndim, t->shape, t->stream, 0);
  Py_DECREF(imported);
  return out;
}

/* A host Tensor of the import's elements; the import is stolen (VER-06's host copy). */
static PyObject *host_copy_of(PyObject *imported) {
  RefCudaTensor *t = (RefCudaTensor *)imported;
  ref_buf *host = ref_buf_alloc((size_t)t->nbytes);
  PyObject *out = NULL;
  if (!host)
    PyErr_NoMemory();
  else if (copy_elements(t, host->mem, REF_CUDA_D2H) < 0)
    ref_buf_decref(host);
  else
    out = (PyObject *)ref_tensor_over(host, t->nbytes ? host->mem : NULL, 0, t->dtype, t->ndim,
                                      t->shape, NULL, 0);
  Py_DECREF(imported);
  return out;
}

/* device=: 0 for the GPU (None, "cuda", (kDLCUDA, 0)), 1 for the host ("cpu", (kDLCPU, 0)),
 * -1 with BufferError for any other (CPY-08). */
static int wants_host(PyObject *device) {
  if (device == Py_None) return 0;
  if (PyUnicode_Check(device))
    return PyUnicode_CompareWithASCIIString(device, "cuda") == 0  ? 0
           : PyUnicode_CompareWithASCIIString(device, "cpu") == 0 ? 1
                                                                   : -2;
  int type = -1, id = -1;
  if (PyTuple_Check(device) && PyTuple_GET_SIZE(device) == 2) {
    type = (int)PyLong_AsLong(PyTuple_GET_ITEM(device, 0));
    id = (int)PyLong_AsLong(PyTuple_GET_ITEM(device, 1));
    PyErr_Clear();
  }
  return type == kDLCUDA && id == 0 ? 0 : type == kDLCPU && id == 0 ? 1 : -2;
}

/* device="cpu": the producer's host copy (dl_device=(kDLCPU, 0), stream None: STR-12),
 * imported as host memory; copy=False cannot have one unless the producer is on the host
 * (CPY-07). A producer on (type, id)
 * older than dl_device (TypeError, VER-06) gives its own device's export: a (kDLCUDA, 0) one
 * is imported on the GPU and copied here, a (kDLCPU, 0) one imported as it is, and another
 * device's is BufferError (no copy to the host can be had). */
static PyObject *to_host(PyObject *x, PyObject *copy, int type, int id) {
  int on_host = type == kDLCPU && id == 0; /* no copy needed: copy=False is passed on */
  if (copy == Py_False && !on_host && ref_fault_is(FAULT_CUDA_CONSUMER_HOST_COPY_FALSE))
    copy = Py_None; /* the fault: the copy=False asked for is dropped, the copy made */
  else if (copy == Py_False && !on_host) {
    PyErr_SetString(PyExc_BufferError, "cuda_from_dlpack: copy=False, but data on the GPU needs "
                    "a copy to reach the CPU (CPY-07)");
    return NULL;
  }
  PyObject *method = PyObject_GetAttrString(x, "__dlpack__");
  PyObject *empty = PyTuple_New(0), *cap = NULL;
  PyObject *kw = Py_BuildValue("{s:O,s:(ii),s:(ii),s:O}", "stream", Py_None, "max_version",
                               (int)REF_SPEC_MAJOR, (int)REF_SPEC_MINOR, "dl_device",
                               (int)kDLCPU, 0, "copy", copy);
  if (method && empty && kw) cap = PyObject_Call(method, empty, kw);
  Py_XDECREF(kw);
  Py_XDECREF(empty);
  if (!cap && method && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    Py_DECREF(method);
    if (type == kDLCUDA && id == 0) {
      int is_copy;
      PyObject *on_gpu = through_dlpack(x, Py_None, &is_copy);
      return on_gpu ? host_copy_of(on_gpu) : NULL;
    }
    if (!on_host)
      return PyErr_Format(PyExc_BufferError, "cuda_from_dlpack: device='cpu', but the producer "
                          "on (%d, %d) takes no dl_device (VER-06) and its memory is not the "
                          "host's", type, id);
    cap = PyObject_CallMethod(x, "__dlpack__", NULL); /* the old protocol: its host export */
  } else {
    Py_XDECREF(method);
  }
  if (!cap) return NULL;
  PyObject *res = PyCapsule_CheckExact(cap) ? ref_import_capsule(cap, copy == Py_True) : NULL;
  if (!res && !PyErr_Occurred())
    PyErr_SetString(PyExc_TypeError, "__dlpack__ did not return a PyCapsule");
  Py_DECREF(cap);
  return res;
}

PyObject *ref_cuda_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  static char *kwlist[] = {"", "device", "copy", NULL};
  PyObject *x, *device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:cuda_from_dlpack", kwlist, &x, &device,
                                   &copy) ||
      ref_check_copy(copy) < 0 || !ref_cuda_bound())
    return NULL;
  int host = wants_host(device);
  if (host < 0)
    return PyErr_Format(PyExc_BufferError, "cuda_from_dlpack: device=%R; the reference places "
                        "data on the CPU or CUDA device 0 (CPY-08)", device);
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
  /* DEV-06: a host copy may be asked of a producer on any device */
  if (host) return to_host(x, copy, type, id);
  if (type != kDLCUDA || id != 0) /* DEV-07 */
    return PyErr_Format(PyExc_BufferError, "cuda_from_dlpack imports (kDLCUDA, 0) memory; the "
                        "producer is on (%d, %d)", type, id);
  int used, is_copy = 0;
  PyObject *res = through_table(x, &used, &is_copy);
  if (!used) res = through_dlpack(x, copy, &is_copy);
  /* CPY-06: copy=True gives memory of ref's own; an IS_COPIED export is that already (FLG-05) */
  return res && copy == Py_True && !is_copy ? device_copy(res) : res;
}
