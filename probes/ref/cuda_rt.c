/* cuda_rt: the CUDA runtime the reference's CUDA tensors use, bound at run time, and the
 * reference's current CUDA stream.
 *
 * The module links no CUDA library. `_ref.cuda_bind(functions)` takes the addresses of the
 * runtime's functions from the Python side (dlconform.kit.cuda loaded the library: the
 * system's libcudart, or the simulated one DLCONFORM_CUDART names), so the reference, the
 * checks and every library in the process share one runtime and its streams.
 *
 * Invariants:
 *  - ref_cuda's pointers are all set (bound) or all NULL; rebinding replaces them all, with
 *    the GIL held;
 *  - stream handles are DLPack's ints: 1 the legacy default stream, 2 the per-thread default
 *    stream, above 2 a cudaStream_t (the runtime API takes 1 and 2 as its own special
 *    handles, cudaStreamLegacy and cudaStreamPerThread);
 *  - the current stream is per thread, 1 until `_ref.cuda_set_stream(h)` sets another;
 *  - device memory is owned by an "owner" managed tensor whose deleter frees it with
 *    cudaFree, wrapped in a ref_buf: the last release frees it, from any thread, without
 *    touching Python (OWN-04). */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

ref_cuda_runtime ref_cuda;

static _Thread_local uintptr_t current_stream = REF_CUDA_LEGACY;

uintptr_t ref_cuda_current_stream(void) { return current_stream; }

int ref_cuda_bound(void) {
  if (ref_cuda.Malloc) return 1;
  PyErr_SetString(PyExc_RuntimeError,
                  "no CUDA runtime bound: call dlconform._ref.cuda_bind() (the ref@cuda target "
                  "does, with the runtime dlconform.kit.cuda loaded)");
  return 0;
}

int ref_cuda_check(int code, const char *call) {
  if (code == 0) return 0;
  ref_cuda.GetLastError(); /* the error is ours: no later caller meets it as its own */
  const char *text = ref_cuda.GetErrorString(code);
  PyErr_Format(PyExc_RuntimeError, "%s: %s (cudaError %d)", call, text ? text : "?", code);
  return -1;
}

int ref_cuda_order(uintptr_t consumer, uintptr_t producer) {
  void *event = NULL;
  if (ref_cuda_check(ref_cuda.EventCreateWithFlags(&event, 0x02 /* DisableTiming */),
                     "cudaEventCreateWithFlags") < 0)
    return -1;
  int rc = ref_cuda_check(ref_cuda.EventRecord(event, (void *)producer), "cudaEventRecord");
  if (rc == 0)
    rc = ref_cuda_check(ref_cuda.StreamWaitEvent((void *)consumer, event, 0), "cudaStreamWaitEvent");
  ref_cuda.EventDestroy(event); /* CUDA keeps a recorded event alive until its waits ran */
  return rc;
}

/* The owner's deleter: gives the device memory back (no Python, any thread: OWN-04). */
static void owner_free(DLManagedTensorVersioned *m) {
  if (m->dl_tensor.data && ref_cuda.Free) ref_cuda.Free(m->dl_tensor.data);
  free(m);
}

ref_buf *ref_cuda_buf_alloc(size_t size) {
  DLManagedTensorVersioned *owner = calloc(1, sizeof *owner);
  if (!owner) return NULL;
  owner->deleter = owner_free;
  void *ptr = NULL;
  if (size > 0 && ref_cuda.Malloc(&ptr, size) != 0) {
    ref_cuda.GetLastError();
    free(owner);
    return NULL;
  }
  owner->dl_tensor.data = ptr;
  ref_buf *b = ref_buf_foreign(NULL, owner, (uintptr_t)ptr, (uintptr_t)ptr + size);
  if (!b) owner_free(owner);
  return b;
}

/* ---- the module's functions -------------------------------------------------------- */
#define BIND(field, name) {name, (void (**)(void)) & ref_cuda.field}
static const struct {
  const char *name;
  void (**slot)(void);
} BINDINGS[] = {
    BIND(Malloc, "cudaMalloc"), BIND(Free, "cudaFree"), BIND(Memcpy, "cudaMemcpy"),
    BIND(MemcpyAsync, "cudaMemcpyAsync"), BIND(StreamCreateWithFlags, "cudaStreamCreateWithFlags"),
    BIND(StreamSynchronize, "cudaStreamSynchronize"), BIND(StreamDestroy, "cudaStreamDestroy"),
    BIND(StreamWaitEvent, "cudaStreamWaitEvent"), BIND(EventCreateWithFlags, "cudaEventCreateWithFlags"),
    BIND(EventRecord, "cudaEventRecord"), BIND(EventDestroy, "cudaEventDestroy"),
    BIND(DeviceSynchronize, "cudaDeviceSynchronize"), BIND(GetLastError, "cudaGetLastError"),
    BIND(GetErrorString, "cudaGetErrorString"),
};
#define NBINDINGS (sizeof BINDINGS / sizeof BINDINGS[0])

/* cuda_bind({name: address}): every function of BINDINGS, as non-zero ints. */
static PyObject *py_cuda_bind(PyObject *self, PyObject *functions) {
  (void)self;
  if (!PyDict_Check(functions)) {
    PyErr_SetString(PyExc_TypeError, "cuda_bind takes a dict {function name: address}");
    return NULL;
  }
  uintptr_t found[NBINDINGS];
  for (size_t i = 0; i < NBINDINGS; i++) {
    PyObject *v = PyDict_GetItemString(functions, BINDINGS[i].name); /* borrowed */
    unsigned long long a = v && PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : 0;
    if (PyErr_Occurred()) return NULL;
    if (!a) return PyErr_Format(PyExc_ValueError, "cuda_bind: no address for %s", BINDINGS[i].name);
    found[i] = (uintptr_t)a;
  }
  for (size_t i = 0; i < NBINDINGS; i++) /* all or nothing */
    memcpy(BINDINGS[i].slot, &found[i], sizeof found[i]);
  Py_RETURN_NONE;
}

static PyObject *py_cuda_current_stream(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(current_stream);
}

/* cuda_set_stream(handle): makes it this thread's current stream (1, 2 or a handle above
 * 2); returns the previous one. */
static PyObject *py_cuda_set_stream(PyObject *self, PyObject *arg) {
  (void)self;
  unsigned long long h = PyLong_Check(arg) ? PyLong_AsUnsignedLongLong(arg) : 0;
  if (PyErr_Occurred()) PyErr_Clear();
  if (!h || PyBool_Check(arg))
    return PyErr_Format(PyExc_ValueError, "cuda_set_stream takes 1, 2 or a stream handle");
  uintptr_t before = current_stream;
  current_stream = (uintptr_t)h;
  return PyLong_FromUnsignedLongLong(before);
}

static PyMethodDef cuda_methods[] = {
    {"cuda_bind", py_cuda_bind, METH_O,
     "cuda_bind({name: address}): the CUDA runtime functions CudaTensor uses."},
    {"cuda_current_stream", py_cuda_current_stream, METH_NOARGS,
     "This thread's current CUDA stream (1: the legacy default stream)."},
    {"cuda_set_stream", py_cuda_set_stream, METH_O,
     "cuda_set_stream(handle): this thread's current CUDA stream; returns the previous one."},
    {NULL, NULL, 0, NULL},
};

int ref_cuda_init(PyObject *module) {
  PyObject *names = PyTuple_New(NBINDINGS);
  if (!names) return -1;
  for (size_t i = 0; i < NBINDINGS; i++) {
    PyObject *s = PyUnicode_FromString(BINDINGS[i].name);
    if (!s) {
      Py_DECREF(names);
      return -1;
    }
    PyTuple_SET_ITEM(names, i, s);
  }
  if (PyModule_AddObject(module, "CUDA_FUNCTIONS", names) < 0) {
    Py_DECREF(names);
    return -1;
  }
  return PyModule_AddFunctions(module, cuda_methods);
}
