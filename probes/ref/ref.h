/* ref: the reference DLPack 1.3 implementation (CPython module dlconform._ref).
 *
 * Shared declarations of the module's C files, listed bottom-up: a file calls only files
 * above it in this list (harness/tests/test_layering.py keeps it so).
 *   buffer.c        refcounted buffers and strided element copies (no Python)
 *   gil.c           whether the calling thread holds the GIL (the cached deleter's test)
 *   parse.c         the shared Python arguments: dtype names, dims, max_version, copy
 *   faults.c        the catalogue of built-in faults, the active one, the refusal seam
 *   faults_producer.c, faults_consumer.c, faults_xapi.c   the other seams (faults.h)
 *   managed.c       the managed structs ref hands out and their deleters
 *   capsule.c       capsules and the standard capsule destructor
 *   tensor_core.c   what a Tensor's exports are made of: DLTensor, flags, compact copies
 *   cache.c         the cached DLManagedTensorVersioned (one per tensor; GIL-counted,
 *                   or CAS and atomic counts in free-threaded builds)
 *   export.c        __dlpack__ and the no-copy versioned export
 *   tensor.c        the Tensor type
 *   import.c        the consumer's import of capsules and owning managed tensors
 *   consume.c       from_dlpack, the reference consumer
 *   exchange_api.c  the static DLPackExchangeAPI and __dlpack_c_exchange_api__
 *   api_forge.c     ApiForge: forged exchange tables for consumer checks
 *   forge.c         Forge: capsules with any metadata and counted deleters
 *   vstream.c       DeviceTensor: the virtual stream device
 *   cuda_rt.c       the CUDA runtime bound at run time, the current CUDA stream, device
 *                   memory in ref_bufs
 *   cuda_tensor.c   CudaTensor: tensors in CUDA memory, with CUDA's stream semantics
 *   cuda_xapi.c     CudaTensor's exchange API table (XAPI on kDLCUDA)
 *   cuda_consume.c  cuda_from_dlpack: the reference consumer of CUDA memory
 *   module.c        module init: types, functions, fault controls
 */
#ifndef DLCONFORM_REF_H
#define DLCONFORM_REF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include <stdint.h>
#include "check.h"

/* The spec version this reference implements (VER-07). */
#define REF_SPEC_MAJOR 1u
#define REF_SPEC_MINOR 3u
/* Highest ndim accepted anywhere; bounds every loop over dims. */
#define REF_MAX_NDIM 64
#define REF_ALIGN 256

/* ---- buffers (buffer.c) -----------------------------------------------------------
 * A ref_buf is the memory behind one or more tensors. It is plain C: every holder (a
 * Tensor, a view, each export in flight, the cached export) holds one reference, so
 * exported memory stays valid after the Python tensor dies (OWN-05). The last release
 * frees it, from any thread, without touching Python (OWN-04). */
typedef struct ref_buf {
  atomic_long refs;
  char *mem;       /* owned allocation (REF_ALIGN-aligned) or NULL */
  uintptr_t lo;    /* accessible byte range [lo, hi): views must stay inside it */
  uintptr_t hi;
  /* An imported tensor owned by this buffer: its deleter runs once, at the last
   * release (OWN-03). At most one of the two is set. */
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
  int deleter_calls; /* how often the last release calls that deleter: 1 (OWN-03) */
  int null_check;    /* 1: a NULL deleter is skipped (OWN-01) */
} ref_buf;

/* A zero-filled owned buffer of size bytes; size 0 gives mem NULL. NULL on OOM. */
ref_buf *ref_buf_alloc(size_t size);
/* A buffer owning an imported managed tensor (exactly one of the two non-NULL). */
ref_buf *ref_buf_foreign(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                         uintptr_t lo, uintptr_t hi);
void ref_buf_incref(ref_buf *b);
void ref_buf_decref(ref_buf *b);
/* Runs the imported tensor's deleter once, skipping a NULL one unless null_check is 0
 * (OWN-01); the last release runs it deleter_calls times (OWN-03). */
void ref_buf_call_deleter(ref_buf *b);

/* Strided element copies. Strides are in elements (NULL: row-major). ndim <= REF_MAX_NDIM,
 * the extent must have been validated. src/dst point at the first element (data +
 * byte_offset). */
void ref_gather(const char *src, int32_t ndim, const int64_t *shape, const int64_t *strides,
                size_t itemsize, char *out);
void ref_scatter(char *dst, int32_t ndim, const int64_t *shape, const int64_t *strides,
                 size_t itemsize, const char *in);

/* The opening fields of a type of this module: its name in dlconform._ref, the size of
 * its objects, the default flags. */
#define REF_TYPE_HEAD(name, object)                                        \
  PyVarObject_HEAD_INIT(NULL, 0)                                           \
  .tp_name = "dlconform._ref." name, .tp_basicsize = sizeof(object),       \
  .tp_flags = Py_TPFLAGS_DEFAULT

#include "faults.h"

/* ---- gil.c --------------------------------------------------------------------------- */
/* 1 when the calling thread holds the GIL; what PyGILState_Check answers. */
int ref_gil_held(void);

/* ---- parse.c ------------------------------------------------------------------------- */
/* Parses a dtype name or (code, bits, lanes) tuple. -1 with TypeError/ValueError. */
int ref_parse_dtype(PyObject *obj, DLDataType *out);
/* Parses a tuple/list of int64 into out (at most REF_MAX_NDIM). Returns the count or -1. */
int ref_parse_dims(PyObject *obj, const char *what, int64_t *out);
/* The same, with at most max_dims entries (out holds that many). */
int ref_parse_dims_upto(PyObject *obj, const char *what, int64_t *out, int max_dims);
PyObject *ref_dims_tuple(int32_t n, const int64_t *v);
/* max_version: 1 for a versioned capsule (major >= 1, VER-03), 0 for a legacy one (None,
 * VER-02; major 0, VER-04), -1 with TypeError when not None or a 2-tuple of ints. */
int ref_parse_max_version(PyObject *max_version);
/* copy: 0 for None, True or False; else -1 with TypeError. */
int ref_check_copy(PyObject *copy);

/* ---- the Tensor object (its type: tensor.c) ------------------------------------------- */
typedef struct {
  PyObject_HEAD
  ref_buf *buf;          /* holds one reference */
  char *data;            /* DLTensor.data: buffer start, NULL when zero-size */
  uint64_t byte_offset;
  DLDataType dtype;
  size_t itemsize;       /* dlc_dtype_itemsize: sub-byte types are stored padded */
  int subbyte;
  int32_t ndim;
  int64_t *shape;        /* ndim entries; NULL when ndim == 0 */
  int64_t *strides;      /* ndim entries, elements; NULL when ndim == 0 */
  uint64_t numel;
  int zero_size;
  int readonly;          /* fixed for the tensor's life, so the cached export's flags are */
  int exportable;        /* 0: __dlpack__ raises BufferError (ERR-01) */
  /* The cached versioned export of the free-threaded discipline (created lazily,
   * CAS-published, atomic counts), or NULL. The tensor holds one reference to it. */
  _Atomic(DLManagedTensorVersioned *) cache;
  /* The cached versioned export of the GIL discipline (GIL builds): read, written and
   * counted only with the GIL held, or NULL. The tensor holds one reference to it. */
  DLManagedTensorVersioned *cache_gil;
} RefTensor;

/* ---- managed.c ------------------------------------------------------------------------ */
/* Managed structs that take their own reference to buf and copy shape/strides (NULL
 * stays NULL). manager_ctx is the struct itself. A versioned struct is refcounted (1 at
 * creation): its deleter drops one reference and frees it at zero (OWN-02), so the cached
 * export can hand the same struct out several times. Neither deleter touches Python
 * (OWN-04). NULL when out of memory (no Python error set). */
DLManagedTensorVersioned *ref_make_versioned(ref_buf *buf, const DLTensor *t, uint64_t flags);
DLManagedTensor *ref_make_legacy(ref_buf *buf, const DLTensor *t);
/* One of the two (flags unused for a legacy struct). */
void *ref_make_managed(ref_buf *buf, const DLTensor *t, uint64_t flags, int versioned);
void ref_versioned_retain(DLManagedTensorVersioned *m);
/* The versioned deleter: drops one reference. */
void ref_versioned_release(DLManagedTensorVersioned *m);
/* Marks an unpublished candidate as a tensor's cached export (before publication). */
void ref_versioned_mark_cached(DLManagedTensorVersioned *m);
/* GIL discipline: switches an unpublished struct to a plain count guarded by the GIL.
 * Retain and release then need the GIL; its deleter takes the GIL when the calling
 * thread lacks it (OWN-04) and leaks once the interpreter is finalising. */
void ref_versioned_use_gil_count(DLManagedTensorVersioned *m);
void ref_versioned_retain_gil(DLManagedTensorVersioned *m);
void ref_versioned_release_gil(DLManagedTensorVersioned *m);

/* ---- capsule.c ------------------------------------------------------------------------ */
/* A capsule holding managed (a versioned struct when kind_versioned), with the standard
 * destructor (CAP-05..08); tensor: a Tensor capsule, whose destructor feels the producer's
 * destructor faults. On failure the struct's deleter is called and NULL returned. */
PyObject *ref_capsule_new(void *managed, const char *name, int kind_versioned, int tensor);

/* ---- tensor_core.c -------------------------------------------------------------------- */
/* Fills a DLTensor that borrows the tensor's arrays (no allocation). */
void ref_tensor_fill(const RefTensor *t, DLTensor *out);
/* The flags an export of t carries; copied: a copy (FLG-02, FLG-04, FLG-06). */
uint64_t ref_export_flags(const RefTensor *t, int copied);
/* A compact row-major copy of t's elements in a new buffer (NULL + MemoryError). */
ref_buf *ref_copy_compact(const RefTensor *t);
/* The same, with dl (filled from t) pointed at the copy: data, byte_offset 0, row-major
 * strides written to rm (REF_MAX_NDIM entries). */
ref_buf *ref_copy_export(const RefTensor *t, DLTensor *dl, int64_t *rm);

/* ---- cache.c -------------------------------------------------------------------------- */
/* One hand-out of t's cached versioned export (created on first use), free-threaded
 * discipline: CAS publication and atomic counts, safe without the GIL. Never touches
 * Python; NULL only when out of memory. */
DLManagedTensorVersioned *ref_cache_handout(RefTensor *t);
/* The same with the GIL discipline: the caller holds the GIL, and no locked instruction
 * runs on the hand-out or in its deleter on a thread that holds the GIL. */
DLManagedTensorVersioned *ref_cache_handout_gil(RefTensor *t);
/* Drops the tensor's own references to its cached exports (tensor dealloc, GIL held). */
void ref_cache_release(RefTensor *t);

/* ---- export.c ------------------------------------------------------------------------- */
/* A no-copy versioned export of t (GIL held): the cached hand-out (GIL discipline, or the
 * free-threaded one where Py_GIL_DISABLED), or a fresh struct while a fault that alters
 * exports is active. NULL only when out of memory. */
DLManagedTensorVersioned *ref_export_versioned_nocopy(RefTensor *t);
/* A fresh struct carrying what the cached export would (the active export faults too). */
DLManagedTensorVersioned *ref_export_versioned_fresh(RefTensor *t);
PyObject *ref_tensor_dlpack(RefTensor *self, PyObject *args, PyObject *kwargs);

/* ---- tensor.c ------------------------------------------------------------------------- */
extern PyTypeObject RefTensor_Type;
#define RefTensor_Check(o) PyObject_TypeCheck((o), &RefTensor_Type)
/* New tensor over buf (steals one reference to buf, also on failure). shape/strides are
 * copied; strides NULL means row-major. The extent must fit buf (checked: ValueError). */
RefTensor *ref_tensor_over(ref_buf *buf, char *data, uint64_t byte_offset, DLDataType dtype,
                           int32_t ndim, const int64_t *shape, const int64_t *strides,
                           int readonly);

/* ---- import.c ------------------------------------------------------------------------- */
/* Imports an owned managed tensor (exactly one of legacy/versioned; stolen: on failure its
 * deleter is called and NULL returned with BufferError). copy: a private copy. */
PyObject *ref_import_managed(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                             int copy);
/* The same for a versioned one, without a copy; NULL m is ValueError. Used by
 * managed_tensor_to_py_object_no_sync. */
PyObject *ref_import_versioned(DLManagedTensorVersioned *m);
/* 1 when m is of our major and flagged IS_COPIED: already private (FLG-05, VER-08). */
int ref_import_is_copy(const DLManagedTensorVersioned *m);
/* Consumes a capsule: checks its name (CAP-04, VER-05), renames it (CAP-03), imports. */
PyObject *ref_import_capsule(PyObject *cap, int copy);

/* ---- consume.c ------------------------------------------------------------------------ */
PyObject *ref_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs);

/* The exchange table type(x) offers for an import as r plans it (XAPI-02, 04, 06; its
 * managed_tensor_from_py_object_no_sync set), its capsule held in *cap; NULL (no exception,
 * *cap NULL) to fall back to __dlpack__. */
const DLPackExchangeAPI *ref_offered_table(PyObject *x, const ref_request *r, PyObject **cap);

/* ---- exchange_api.c ------------------------------------------------------------------- */
/* Installs __dlpack_c_exchange_api__ on type (XAPI-01) for the active fault. */
int ref_exchange_api_install(PyTypeObject *type);
/* Re-installs it for the active fault (the XAPI discovery and table faults); a no-op
 * before ref_exchange_api_install. Called when the fault changes (module.c). */
void ref_exchange_api_refresh(void);
/* A "dlpack_exchange_api" capsule of a second static table whose managed export bypasses
 * the cache (a fresh struct per call); the module's UNCACHED_EXCHANGE_API, for benchmarks. */
PyObject *ref_uncached_api_capsule(void);
/* The clean static table (XAPI-05), whatever fault is active. */
const DLPackExchangeAPI *ref_exchange_api_table(void);

/* The allocator of an exchange table (XAPI-13): a row-major tensor like prototype on
 * device, its memory from alloc (zero bytes: NULL data); failures through SetError only. */
int ref_xapi_allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                      void (*SetError)(void *error_ctx, const char *kind, const char *message),
                      DLDevice device, ref_buf *(*alloc)(size_t size));

/* ---- the other types: api_forge.c, forge.c, vstream.c ---------------------------------- */
extern PyTypeObject RefApiForge_Type;     /* forged exchange tables (XAPI-04/06/11) */
extern PyTypeObject RefForge_Type;        /* capsules with any metadata */
extern PyTypeObject RefDeviceTensor_Type; /* the virtual stream device */
/* Adds VSTREAM_DEVICE and the vstream_* functions to the module. */
int ref_vstream_init(PyObject *module);

/* ---- cuda_rt.c ------------------------------------------------------------------------ */
/* The CUDA runtime functions CudaTensor calls (cudaError_t is an int), all NULL until
 * _ref.cuda_bind() sets them all. */
typedef struct {
  int (*Malloc)(void **ptr, size_t size);
  int (*Free)(void *ptr);
  int (*Memcpy)(void *dst, const void *src, size_t n, int kind);
  int (*MemcpyAsync)(void *dst, const void *src, size_t n, int kind, void *stream);
  int (*StreamCreateWithFlags)(void **stream, unsigned flags);
  int (*StreamSynchronize)(void *stream);
  int (*StreamDestroy)(void *stream);
  int (*StreamWaitEvent)(void *stream, void *event, unsigned flags);
  int (*EventCreateWithFlags)(void **event, unsigned flags);
  int (*EventRecord)(void *event, void *stream);
  int (*EventDestroy)(void *event);
  int (*DeviceSynchronize)(void);
  int (*GetLastError)(void);
  const char *(*GetErrorString)(int code);
} ref_cuda_runtime;
extern ref_cuda_runtime ref_cuda;
#define REF_CUDA_LEGACY 1     /* DLPack's (and the runtime's) legacy default stream */
#define REF_CUDA_PER_THREAD 2 /* the per-thread default stream */
#define REF_CUDA_H2D 1
#define REF_CUDA_D2H 2
#define REF_CUDA_D2D 3
/* 1 when bound, else 0 with RuntimeError. */
int ref_cuda_bound(void);
/* 0 for cudaSuccess, else -1 with RuntimeError naming call (the runtime's error cleared). */
int ref_cuda_check(int code, const char *call);
/* Makes stream consumer wait for what is enqueued on producer now (an event; STR-01). */
int ref_cuda_order(uintptr_t consumer, uintptr_t producer);
/* This thread's current stream (DLPack's int; 1 unless cuda_set_stream set another). */
uintptr_t ref_cuda_current_stream(void);
/* A ref_buf over size bytes of device memory (cudaMalloc; the last release frees it); NULL
 * when the runtime refuses (no Python error set). */
ref_buf *ref_cuda_buf_alloc(size_t size);
/* Adds cuda_bind, cuda_current_stream, cuda_set_stream and CUDA_FUNCTIONS. */
int ref_cuda_init(PyObject *module);

/* ---- cuda_tensor.c, cuda_xapi.c ------------------------------------------------------- */
typedef struct {
  PyObject_HEAD
  ref_buf *buf;          /* the device memory; holds one reference */
  DLDataType dtype;
  size_t itemsize;
  int32_t ndim;
  int64_t shape[REF_MAX_NDIM];
  int64_t strides[REF_MAX_NDIM]; /* row-major, elements */
  uint64_t nbytes;
  uintptr_t stream;      /* where its data was produced: its own non-blocking stream, or
                            for an import (to_py) the stream current when it was made */
  int own_stream;        /* 1: stream is its own, destroyed with it */
} RefCudaTensor;
extern PyTypeObject RefCudaTensor_Type;
#define RefCudaTensor_Check(o) PyObject_TypeCheck((o), &RefCudaTensor_Type)
/* Fills a DLTensor that borrows t's arrays: device (kDLCUDA, 0), data NULL when empty. */
void ref_cuda_tensor_fill(const RefCudaTensor *t, DLTensor *out);
/* A new CudaTensor over buf (stolen) holding dtype/shape row-major; NULL with an error. */
RefCudaTensor *ref_cuda_tensor_over(ref_buf *buf, DLDataType dtype, int32_t ndim,
                                    const int64_t *shape, uintptr_t stream, int own_stream);
/* A CudaTensor owning an imported tensor (exactly one of legacy/versioned; stolen: on
 * failure its deleter is called and NULL returned with BufferError), read on stream (DLPack's
 * int). Takes compact row-major whole-byte tensors on (kDLCUDA, 0). */
PyObject *ref_cuda_import(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                          uintptr_t stream);
/* Installs CudaTensor.__dlpack_c_exchange_api__ (cuda_xapi.c). */
int ref_cuda_xapi_install(PyTypeObject *type);

/* ---- cuda_consume.c -------------------------------------------------------------------- */
PyObject *ref_cuda_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs);

#endif /* DLCONFORM_REF_H */
