/* cuda_xapi: CudaTensor's DLPackExchangeAPI, the exchange table on kDLCUDA (XAPI-01..19),
 * as the class attribute CudaTensor.__dlpack_c_exchange_api__.
 *
 * Invariants:
 *  - the table is static (XAPI-05), prev_api NULL (XAPI-07), every function set;
 *  - current_work_stream(kDLCUDA, 0) is the reference's current stream of the calling
 *    thread as a cudaStream_t: NULL for the legacy default stream (the runtime API's 0),
 *    the handle inside cuda_set_stream() (XAPI-16); kDLCPU gives NULL (no stream);
 *  - the *_no_sync functions enqueue nothing on any stream and never block the host
 *    (XAPI-14, XAPI-15, XAPI-17, XAPI-19): the consumer orders its work itself, on the
 *    stream current_work_stream names;
 *  - managed_tensor_to_py_object_no_sync steals the tensor on success and on failure
 *    (XAPI-17); the other functions take only CudaTensors (XAPI-14). */
#include "ref.h"

#include <string.h>

/* XAPI-13: through SetError exactly once, never touching Python. */
static int cuda_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                          void (*SetError)(void *error_ctx, const char *kind, const char *message)) {
  if (!ref_cuda.Malloc) {
    if (out) *out = NULL;
    if (SetError) SetError(error_ctx, "RuntimeError", "no CUDA runtime bound");
    return -1;
  }
  return ref_xapi_allocate(prototype, out, error_ctx, SetError, (DLDevice){kDLCUDA, 0},
                           ref_cuda_buf_alloc);
}

static RefCudaTensor *cuda_tensor(PyObject *obj) {
  if (obj && RefCudaTensor_Check(obj)) return (RefCudaTensor *)obj;
  PyErr_SetString(PyExc_TypeError, "expected a dlconform._ref.CudaTensor"); /* XAPI-14 */
  return NULL;
}

static int cuda_managed_from_py(void *py_object, DLManagedTensorVersioned **out) {
  *out = NULL;
  RefCudaTensor *t = cuda_tensor(py_object);
  if (!t) return -1;
  if (ref_fault_is(FAULT_CUDA_FROM_PY_SYNCHRONIZES) && /* fault: XAPI-14's "no sync" */
      ref_cuda_check(ref_cuda.StreamSynchronize((void *)t->stream), "cudaStreamSynchronize") < 0)
    return -1;
  DLTensor dl;
  ref_cuda_tensor_fill(t, &dl);
  if (!(*out = ref_make_versioned(t->buf, &dl, 0))) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

static int cuda_dltensor_from_py(void *py_object, DLTensor *out) {
  RefCudaTensor *t = cuda_tensor(py_object);
  if (!t) return -1;
  if (ref_fault_is(FAULT_CUDA_DLTENSOR_FROM_WAITS) && /* fault: XAPI-15's "no sync" */
      ref_cuda_order(ref_cuda_current_stream(), t->stream) < 0)
    return -1;
  ref_cuda_tensor_fill(t, out); /* borrows the tensor's arrays: no allocation (XAPI-15) */
  return 0;
}

/* Steals tensor (XAPI-17): a CudaTensor over it, or its deleter called and -1. */
static int cuda_managed_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
  *out_py_object = NULL;
  if (!tensor) {
    PyErr_SetString(PyExc_ValueError, "NULL tensor");
    return -1;
  }
  if (ref_fault_is(FAULT_CUDA_TO_PY_SYNCHRONIZES)) /* fault: XAPI-17's "no sync" */
    ref_cuda.DeviceSynchronize();
  PyObject *t = ref_cuda_import(NULL, tensor, ref_cuda_current_stream());
  *out_py_object = t;
  return t ? 0 : -1;
}

static int cuda_current_work_stream(DLDeviceType device_type, int32_t device_id,
                                    void **out_current_stream) {
  if (out_current_stream) *out_current_stream = NULL;
  if (device_type == kDLCPU) return 0; /* XAPI-16: no stream on the CPU */
  if (device_type == kDLCUDA && device_id == 0) {
    uintptr_t s = ref_fault_is(FAULT_CUDA_WORK_STREAM_IGNORES_CONTEXT) ? REF_CUDA_LEGACY
                                                                        : ref_cuda_current_stream();
    if (out_current_stream) *out_current_stream = s == REF_CUDA_LEGACY ? NULL : (void *)s;
    return 0;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  PyErr_Format(PyExc_BufferError, "CudaTensor has no stream for device (%d, %d)",
               (int)device_type, (int)device_id);
  PyGILState_Release(g);
  return -1;
}

static const DLPackExchangeAPI cuda_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = cuda_allocator,
    .managed_tensor_from_py_object_no_sync = cuda_managed_from_py,
    .managed_tensor_to_py_object_no_sync = cuda_managed_to_py,
    .dltensor_from_py_object_no_sync = cuda_dltensor_from_py,
    .current_work_stream = cuda_current_work_stream,
};

int ref_cuda_xapi_install(PyTypeObject *type) {
  /* XAPI-01, XAPI-02: a capsule named dlpack_exchange_api on the type, no destructor */
  PyObject *value = PyCapsule_New((void *)&cuda_api, "dlpack_exchange_api", NULL);
  if (!value) return -1;
  int rc = PyDict_SetItemString(type->tp_dict, "__dlpack_c_exchange_api__", value);
  Py_DECREF(value);
  PyType_Modified(type);
  return rc;
}
