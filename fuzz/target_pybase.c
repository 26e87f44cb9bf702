/* target_pybase: the throughput baseline that still does a consumer's work. Same start-up as
 * target_consumer (pyhost), and per input: one fixed legacy capsule (float32, shape (4,),
 * row-major, static buffer, counting deleter), a producer object (producer.h), a call of
 * the consumer's from_dlpack, and dropping the result. No record decoding, no memory
 * planning, no oracles: what any harness feeding a consumer must pay per input (the
 * TOOLCHAIN.md figure, "numpy.from_dlpack on a forged capsule"). Comparing the consumer
 * target with it measures the harness's own overhead; target_pyempty (an empty body) is
 * the floor of the engine alone. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <dlpack/dlpack.h>

#include "producer.h"
#include "pyhost.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static float buffer[4];
static int64_t shape[1] = {4};
static DLManagedTensor managed;
static unsigned long long deleted;

static void deleter(DLManagedTensor *self) {
  (void)self;
  ++deleted;
}

static void capsule_destructor(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (m && m->deleter) m->deleter(m);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  dlc_pyhost_init();
  if (dlc_producer_type_init() != 0) abort();
  managed.dl_tensor.data = buffer;
  managed.dl_tensor.device.device_type = kDLCPU;
  managed.dl_tensor.ndim = 1;
  managed.dl_tensor.dtype.code = kDLFloat;
  managed.dl_tensor.dtype.bits = 32;
  managed.dl_tensor.dtype.lanes = 1;
  managed.dl_tensor.shape = shape;
  managed.deleter = deleter;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data;
  (void)size;
  PyObject *capsule = PyCapsule_New(&managed, "dltensor", capsule_destructor);
  PyObject *producer = capsule ? dlc_producer_new(capsule, kDLCPU, 0) : NULL;
  Py_XDECREF(capsule);
  PyObject *result = producer ? PyObject_CallOneArg(dlc_py.from_dlpack, producer) : NULL;
  Py_XDECREF(producer);
  Py_XDECREF(result);
  PyErr_Clear();
  return 0;
}
