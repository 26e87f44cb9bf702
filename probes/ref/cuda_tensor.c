/* cuda_tensor: CudaTensor, the reference's tensors in CUDA memory, exported with CUDA's
 * stream semantics (the array API's __dlpack__ on kDLCUDA). The C twin of pyref's device
 * arrays, so that the C path (and the exchange table, cuda_xapi.c) has a CUDA reference.
 *
 * Invariants:
 *  - a CudaTensor is compact and row-major, never read-only, on (kDLCUDA, 0); its memory
 *    is a ref_buf (cuda_rt.c) every export holds a reference to (OWN-05);
 *  - its data was produced on `stream`, its own non-blocking stream: work enqueued there
 *    may still be pending, which is what STR-01 is about;
 *  - __dlpack__(stream=S): None or 1 the legacy default stream (STR-04, STR-05), 2 the
 *    per-thread default stream (STR-06), above 2 a handle (STR-07): S waits on an event
 *    recorded on the tensor's stream before the export returns (STR-01); -1 neither waits
 *    nor synchronises (STR-03); 0 is BufferError (STR-08); not an int is TypeError and an
 *    int below -1 or past 64 bits BufferError (STR-02); S is never destroyed (STR-11);
 *  - dl_device=(kDLCPU, 0) synchronises the tensor's stream, then copies to host memory
 *    flagged IS_COPIED (STR-12, FLG-04); with copy=False it is BufferError (CPY-05);
 *  - copy=True copies on S after its wait, flagged IS_COPIED (CPY-01, CPY-04). */
#include "ref.h"

#include <string.h>

void ref_cuda_tensor_fill(const RefCudaTensor *t, DLTensor *out) {
  out->data = t->nbytes ? (void *)t->buf->lo : NULL; /* LAY-04 */
  out->device = (DLDevice){kDLCUDA, 0};
  out->ndim = t->ndim;
  out->dtype = t->dtype;
  out->shape = t->ndim ? (int64_t *)t->shape : NULL;
  out->strides = t->ndim ? (int64_t *)t->strides : NULL;
  out->byte_offset = 0;
}

RefCudaTensor *ref_cuda_tensor_over(ref_buf *buf, DLDataType dtype, int32_t ndim,
                                    const int64_t *shape, uintptr_t stream, int own_stream) {
  RefCudaTensor *t = PyObject_New(RefCudaTensor, &RefCudaTensor_Type);
  if (!t) {
    ref_buf_decref(buf);
    return NULL;
  }
  t->buf = buf;
  t->dtype = dtype;
  t->itemsize = (size_t)dlc_dtype_itemsize(dtype);
  t->ndim = ndim;
  t->stream = stream;
  t->own_stream = own_stream;
  if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim); /* a 0-d shape may be NULL */
  DLTensor dl = {NULL, {kDLCUDA, 0}, ndim, dtype, t->shape, t->strides, 0};
  dlc_extent e;
  if (dlc_row_major_strides(ndim, t->shape, t->strides) != 0 ||
      (e = dlc_extent_of(&dl)).status != DLC_EXTENT_OK) {
    t->own_stream = 0;
    Py_DECREF(t);
    PyErr_SetString(PyExc_ValueError, "shape has a negative extent or overflows");
    return NULL;
  }
  t->nbytes = e.zero_size ? 0 : (uint64_t)e.hi;
  return t;
}

PyObject *ref_cuda_import(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                          uintptr_t stream) {
  const DLTensor *dl = versioned ? &versioned->dl_tensor : &legacy->dl_tensor;
  dlc_extent e = dlc_extent_of(dl);
  dlc_dtype_info dt = dlc_dtype_classify(dl->dtype, REF_SPEC_MAJOR, REF_SPEC_MINOR);
  const char *why = versioned && versioned->version.major != REF_SPEC_MAJOR
                        ? "a version.major other than 1" /* VER-08 */
                    : !dt.valid ? "an unknown or invalid dtype" /* VER-09: never misread */
                    : dl->device.device_type != kDLCUDA || dl->device.device_id != 0
                        ? "a device other than (kDLCUDA, 0)"
                    : dl->ndim < 0 || dl->ndim > REF_MAX_NDIM || e.status != DLC_EXTENT_OK
                        ? "an invalid layout"
                    : !e.zero_size && !dl->data ? "NULL data for a tensor with elements" /* LAY-04 */
                    : !e.row_major ? "a layout that is not compact row-major"
                    : dt.subbyte ? "a sub-byte element type"
                                                      : NULL;
  ref_buf *buf = NULL;
  /* LAY-03: the first element is at data + byte_offset, and the elements end e.hi past it */
  uintptr_t first = (uintptr_t)dl->data + (uintptr_t)dl->byte_offset;
  if (!why && !(buf = ref_buf_foreign(legacy, versioned, first, first + (uint64_t)e.hi)))
    why = "out of memory";
  if (why) { /* given back at once, exactly once (OWN-03) */
    if (versioned && versioned->deleter) versioned->deleter(versioned);
    if (legacy && legacy->deleter) legacy->deleter(legacy);
    PyErr_Format(PyExc_BufferError, "CudaTensor takes compact row-major (kDLCUDA, 0) tensors; "
                 "this one has %s", why);
    return NULL;
  }
  return (PyObject *)ref_cuda_tensor_over(buf, dl->dtype, dl->ndim, dl->shape, stream, 0);
}

/* CudaTensor(dtype, shape, data): data's bytes (row-major) copied to new device memory, on
 * a new non-blocking stream of the tensor's own. */
static PyObject *CudaTensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  (void)type;
  static char *kwlist[] = {"dtype", "shape", "data", NULL};
  PyObject *dtype_obj, *shape_obj;
  Py_buffer data;
  DLDataType dt;
  int64_t shape[REF_MAX_NDIM];
  if (!ref_cuda_bound() ||
      !PyArg_ParseTupleAndKeywords(args, kwargs, "OOy*", kwlist, &dtype_obj, &shape_obj, &data))
    return NULL;
  int ndim = ref_parse_dims(shape_obj, "shape", shape);
  RefCudaTensor *t = NULL;
  void *stream = NULL;
  if (ndim < 0 || ref_parse_dtype(dtype_obj, &dt) < 0) goto done;
  if (dlc_dtype_classify(dt, REF_SPEC_MAJOR, REF_SPEC_MINOR).subbyte) {
    PyErr_SetString(PyExc_ValueError, "CudaTensor holds whole-byte element types only");
    goto done;
  }
  DLTensor want = {NULL, {kDLCUDA, 0}, ndim, dt, shape, NULL, 0}; /* NULL strides: row-major */
  dlc_extent e = dlc_extent_of(&want);
  uint64_t nbytes = e.zero_size ? 0 : (uint64_t)e.hi;
  if (e.status != DLC_EXTENT_OK) {
    PyErr_SetString(PyExc_ValueError, "shape has a negative extent or overflows");
    goto done;
  }
  if ((uint64_t)data.len != nbytes) {
    PyErr_Format(PyExc_ValueError, "data has %zd bytes; dtype and shape need %llu", data.len,
                 (unsigned long long)nbytes);
    goto done;
  }
  ref_buf *mem = ref_cuda_buf_alloc((size_t)nbytes);
  if (!mem) {
    PyErr_SetString(PyExc_MemoryError, "cudaMalloc failed");
    goto done;
  }
  if ((nbytes && ref_cuda_check(ref_cuda.Memcpy((void *)mem->lo, data.buf, (size_t)nbytes,
                                                REF_CUDA_H2D), "cudaMemcpy") < 0) ||
      ref_cuda_check(ref_cuda.StreamCreateWithFlags(&stream, 0x01 /* NonBlocking */),
                     "cudaStreamCreateWithFlags") < 0) {
    ref_buf_decref(mem);
    goto done;
  }
  if (!(t = ref_cuda_tensor_over(mem, dt, ndim, shape, (uintptr_t)stream, 1)))
    ref_cuda.StreamDestroy(stream); /* ref_cuda_tensor_over dropped mem */
done:
  PyBuffer_Release(&data);
  return (PyObject *)t;
}

static void CudaTensor_dealloc(RefCudaTensor *self) {
  ref_buf_decref(self->buf); /* exports keep the memory (OWN-05) */
  if (self->own_stream && ref_cuda.StreamDestroy) ref_cuda.StreamDestroy((void *)self->stream);
  PyObject_Free(self);
}

/* ---- __dlpack__ ---------------------------------------------------------------------- */
#define NO_SYNC ((uintptr_t)-1)

/* The stream the consumer named (STR-02..08), as a handle; NO_SYNC for -1. 0, or -1 with
 * TypeError or BufferError. */
static int read_stream(PyObject *stream, uintptr_t *out) {
  *out = REF_CUDA_LEGACY; /* None: the legacy default stream (STR-04) */
  if (stream == Py_None) return 0;
  if (!PyLong_Check(stream) || PyBool_Check(stream)) {
    PyErr_Format(PyExc_TypeError, "stream must be None or an int, not %s", Py_TYPE(stream)->tp_name);
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(stream, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v == 0 && !overflow) {
    PyErr_SetString(PyExc_BufferError, "stream=0 is ambiguous on CUDA: pass 1 for the legacy "
                    "default stream, 2 for the per-thread one, or a stream handle");
    return -1;
  }
  if (v == -1 && !overflow) { /* (the overflow answer is -1 too) */
    *out = NO_SYNC;
    return 0;
  }
  unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(stream) : 0;
  int past_64_bits = overflow > 0 && PyErr_Occurred();
  if (past_64_bits) PyErr_Clear();
  if (overflow < 0 || v < -1 || past_64_bits) {
    PyErr_SetString(PyExc_BufferError, "that stream is no CUDA stream (below -1 or past 64 bits)");
    return -1;
  }
  *out = overflow > 0 ? (uintptr_t)u : (uintptr_t)v;
  return 0;
}

/* dl_device: 1 for the host copy (kDLCPU, 0), 0 for None or the tensor's own device;
 * -1 with TypeError or BufferError. */
static int read_dl_device(PyObject *dl_device) {
  if (dl_device == Py_None) return 0;
  int type, id;
  if (!PyTuple_Check(dl_device) || !PyArg_ParseTuple(dl_device, "ii", &type, &id)) {
    PyErr_Clear();
    PyErr_SetString(PyExc_TypeError, "dl_device must be None or a (device_type, device_id) tuple");
    return -1;
  }
  if (type == kDLCPU && id == 0) return 1;
  if (type == kDLCUDA && id == 0) return 0;
  PyErr_Format(PyExc_BufferError, "dl_device=(%d, %d): the reference copies CUDA tensors to "
               "(1, 0) only", type, id);
  return -1;
}

/* A capsule of an export of buf laid out as t, on device, with flags. */
static PyObject *capsule_of(const RefCudaTensor *t, ref_buf *buf, DLDevice device,
                            uint64_t flags, int versioned) {
  DLTensor dl;
  ref_cuda_tensor_fill(t, &dl);
  int64_t bytes[REF_MAX_NDIM]; /* the fault's strides, in bytes (LAY-05 says elements) */
  if (ref_fault_is(FAULT_CUDA_STRIDES_IN_BYTES) && t->ndim) {
    for (int32_t d = 0; d < t->ndim; d++) bytes[d] = t->strides[d] * (int64_t)t->itemsize;
    dl.strides = bytes;
  }
  dl.device = device;
  dl.data = t->nbytes ? (void *)buf->lo : NULL;
  void *managed = ref_make_managed(buf, &dl, flags, versioned);
  if (!managed) return PyErr_NoMemory();
  return ref_capsule_new(managed, versioned ? "dltensor_versioned" : "dltensor", versioned, 0);
}

/* dl_device=(kDLCPU, 0): synchronise, copy to the host, IS_COPIED (STR-12, FLG-04). */
static PyObject *export_to_host(RefCudaTensor *t, PyObject *stream, PyObject *copy, int versioned) {
  if (copy == Py_False) {
    PyErr_SetString(PyExc_BufferError, "dl_device=(1, 0) needs a copy of device memory, and "
                    "copy=False forbids one");
    return NULL;
  }
  if (stream != Py_None) {
    PyErr_SetString(PyExc_BufferError, "dl_device=(1, 0): the host has no streams; pass stream=None");
    return NULL;
  }
  ref_buf *host = ref_buf_alloc((size_t)t->nbytes);
  if (!host) return PyErr_NoMemory();
  if (ref_cuda_check(ref_cuda.StreamSynchronize((void *)t->stream), "cudaStreamSynchronize") < 0 ||
      (t->nbytes && ref_cuda_check(ref_cuda.Memcpy(host->mem, (void *)t->buf->lo,
                                                   (size_t)t->nbytes, REF_CUDA_D2H), "cudaMemcpy") < 0)) {
    ref_buf_decref(host);
    return NULL;
  }
  PyObject *cap = capsule_of(t, host, (DLDevice){kDLCPU, 0}, DLPACK_FLAG_BITMASK_IS_COPIED, versioned);
  ref_buf_decref(host); /* the export holds its own reference */
  return cap;
}

static PyObject *CudaTensor_dlpack(RefCudaTensor *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  uintptr_t s;
  if (!ref_cuda_bound() ||
      !PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kwlist, &stream, &max_version,
                                   &dl_device, &copy) ||
      read_stream(stream, &s) < 0)
    return NULL;
  int versioned = ref_parse_max_version(max_version), to_host;
  if (versioned < 0 || ref_check_copy(copy) < 0 || (to_host = read_dl_device(dl_device)) < 0)
    return NULL;
  if (to_host) return export_to_host(self, stream, copy, versioned);
  if (s != NO_SYNC && ref_cuda_order(s, self->stream) < 0) return NULL; /* STR-01 */
  if (copy != Py_True) return capsule_of(self, self->buf, (DLDevice){kDLCUDA, 0}, 0, versioned);
  if (s == NO_SYNC) {
    PyErr_SetString(PyExc_BufferError, "copy=True with stream=-1: the copy runs on the "
                    "consumer's stream, and -1 names none");
    return NULL;
  }
  ref_buf *mem = ref_cuda_buf_alloc((size_t)self->nbytes);
  if (!mem) {
    PyErr_SetString(PyExc_MemoryError, "cudaMalloc failed");
    return NULL;
  }
  if (self->nbytes && ref_cuda_check(ref_cuda.MemcpyAsync((void *)mem->lo, (void *)self->buf->lo,
                                                          (size_t)self->nbytes, REF_CUDA_D2D, (void *)s),
                                     "cudaMemcpyAsync") < 0) { /* CPY-04: on S */
    ref_buf_decref(mem);
    return NULL;
  }
  PyObject *cap = capsule_of(self, mem, (DLDevice){kDLCUDA, 0}, DLPACK_FLAG_BITMASK_IS_COPIED, versioned);
  ref_buf_decref(mem);
  return cap;
}

static PyObject *CudaTensor_dlpack_device(RefCudaTensor *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ii)", kDLCUDA, 0);
}

static PyObject *get_ptr(RefCudaTensor *t, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(t->nbytes ? t->buf->lo : 0);
}
static PyObject *get_nbytes(RefCudaTensor *t, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(t->nbytes);
}
static PyObject *get_stream(RefCudaTensor *t, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(t->stream);
}
static PyObject *get_shape(RefCudaTensor *t, void *c) {
  (void)c;
  return ref_dims_tuple(t->ndim, t->shape);
}
static PyObject *get_dtype(RefCudaTensor *t, void *c) {
  (void)c;
  return Py_BuildValue("(iii)", t->dtype.code, t->dtype.bits, t->dtype.lanes);
}

/* __cuda_array_interface__ (version 3): how CUDA libraries describe device memory, and how
 * dlconform's fuzz oracles read an import (fuzz/result_view.h). data is (ptr, False): the
 * tensor is compact row-major (strides None); typestr the dtype's array-interface kind where
 * one exists (int i, uint u, float f, complex c, bool b), else raw bytes (V) of the item's
 * size; stream the one its data was produced on, where a reader orders after it (None for 0,
 * which version 3 rules out). */
static PyObject *get_cai(RefCudaTensor *t, void *c) {
  (void)c;
  char kind = 'V';
  if (t->dtype.lanes == 1) {
    switch (t->dtype.code) {
      case kDLInt: kind = 'i'; break;
      case kDLUInt: kind = 'u'; break;
      case kDLFloat: kind = 'f'; break;
      case kDLComplex: kind = 'c'; break;
      case kDLBool: kind = 'b'; break;
      default: break;
    }
  }
  char typestr[32];
  snprintf(typestr, sizeof typestr, "%c%c%zu", t->itemsize == 1 ? '|' : '<', kind, t->itemsize);
  PyObject *shape = ref_dims_tuple(t->ndim, t->shape);
  if (!shape) return NULL;
  PyObject *stream = t->stream ? PyLong_FromUnsignedLongLong(t->stream) : Py_NewRef(Py_None);
  PyObject *d = stream ? Py_BuildValue("{s:N,s:s,s:(KO),s:i,s:O,s:N}", "shape", shape, "typestr",
                                       typestr, "data",
                                       (unsigned long long)(t->nbytes ? t->buf->lo : 0), Py_False,
                                       "version", 3, "strides", Py_None, "stream", stream)
                       : NULL;
  if (!stream) Py_DECREF(shape);
  return d;
}

static PyGetSetDef CudaTensor_getset[] = {
    {"__cuda_array_interface__", (getter)get_cai, NULL, "CUDA array interface, version 3", NULL},
    {"ptr", (getter)get_ptr, NULL, "device address of the first element (0 when empty)", NULL},
    {"nbytes", (getter)get_nbytes, NULL, "bytes of the elements", NULL},
    {"stream", (getter)get_stream, NULL, "the stream its data was produced on", NULL},
    {"shape", (getter)get_shape, NULL, NULL, NULL},
    {"dtype", (getter)get_dtype, NULL, "(code, bits, lanes)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef CudaTensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))CudaTensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)"},
    {"__dlpack_device__", (PyCFunction)CudaTensor_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject RefCudaTensor_Type = {
    REF_TYPE_HEAD("CudaTensor", RefCudaTensor),
    .tp_doc = "CudaTensor(dtype, shape, data): a row-major tensor in CUDA memory, made on a "
              "stream of its own (needs cuda_bind).",
    .tp_new = CudaTensor_new,
    .tp_dealloc = (destructor)CudaTensor_dealloc,
    .tp_methods = CudaTensor_methods,
    .tp_getset = CudaTensor_getset,
};
