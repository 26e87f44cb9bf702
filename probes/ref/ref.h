/* ref: the reference DLPack 1.3 implementation (CPython module dlconform._ref).
 *
 * Shared declarations of the module's C files:
 *   buffer.c        refcounted buffers and strided element copies (no Python)
 *   faults.c        the built-in faults ("mutants"), one clause each
 *   tensor.c        the Tensor type
 *   export.c        __dlpack__: capsules, the capsule destructor, managed-struct deleters
 *   cache.c         the cached DLManagedTensorVersioned (one per tensor; GIL-counted,
 *                   or CAS and atomic counts in free-threaded builds)
 *   gil.c           whether the calling thread holds the GIL (the cached deleter's test)
 *   exchange_api.c  the static DLPackExchangeAPI and __dlpack_c_exchange_api__
 *   consume.c       from_dlpack, the reference consumer
 *   forge.c         Forge: capsules with any metadata and counted deleters
 *   module.c        module init
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

/* Strided element copies. Strides are in elements (NULL: row-major). ndim <= REF_MAX_NDIM,
 * the extent must have been validated. src/dst point at the first element (data +
 * byte_offset). */
void ref_gather(const char *src, int32_t ndim, const int64_t *shape, const int64_t *strides,
                size_t itemsize, char *out);
void ref_scatter(char *dst, int32_t ndim, const int64_t *shape, const int64_t *strides,
                 size_t itemsize, const char *in);

/* ---- faults (faults.c) ------------------------------------------------------------ */
typedef enum {
  FAULT_NONE = 0,
  /* producer (Tensor) */
  FAULT_LEGACY_CAPSULE_NAME,
  FAULT_VERSIONED_CAPSULE_NAME,
  FAULT_DESTRUCTOR_LEAKS,
  FAULT_DESTRUCTOR_IGNORES_USED,
  FAULT_VERSION_WRONG,
  FAULT_IGNORE_MAX_VERSION,
  FAULT_OLD_MAJOR_VERSIONED,
  FAULT_READONLY_UNFLAGGED,
  FAULT_COPY_UNFLAGGED,
  FAULT_UNDEFINED_FLAG,
  FAULT_COPY_IGNORED,
  FAULT_BYTE_STRIDES,
  FAULT_NULL_STRIDES,
  FAULT_ZERO_SIZE_DATA,
  FAULT_BOOL_BITS,
  FAULT_STREAM_ACCEPTED,
  FAULT_STREAM_SYSTEMERROR,
  FAULT_DL_DEVICE_VALUEERROR,
  FAULT_DEVICE_MISMATCH,
  FAULT_CPU_DEVICE_ID,
  FAULT_POSITIONAL_ARGS,
  FAULT_UNEXPORTABLE_TYPEERROR,
  FAULT_CACHE_NO_CAS,
  /* exchange API (XAPI), producer side: exchange_api.c */
  FAULT_XAPI_ON_INSTANCE,
  FAULT_XAPI_CAPSULE_NAME,
  FAULT_XAPI_INT_FORM,
  FAULT_XAPI_TABLE_PER_LOOKUP,
  FAULT_XAPI_PREV_API_GARBAGE,
  FAULT_XAPI_NULL_ALLOCATOR,
  FAULT_XAPI_NULL_FROM_PY,
  FAULT_XAPI_NULL_TO_PY,
  FAULT_XAPI_NULL_STREAM,
  FAULT_XAPI_ALLOC_SILENT_FAILURE,
  FAULT_XAPI_ALLOC_DOUBLE_SETERROR,
  FAULT_XAPI_FROM_PY_NO_TYPECHECK,
  FAULT_XAPI_FROM_PY_RUNTIMEERROR,
  FAULT_XAPI_DLTENSOR_COPIES,
  FAULT_XAPI_STREAM_CPU_NONNULL,
  FAULT_XAPI_TO_PY_NO_STEAL,
  FAULT_XAPI_ABORT_BAD_DEVICE,
  /* exchange API (XAPI), consumer side: consume.c */
  FAULT_CONSUMER_XAPI_ON_INSTANCE,
  FAULT_CONSUMER_XAPI_IGNORES_MAJOR,
  FAULT_CONSUMER_XAPI_NULL_DLTENSOR,
  FAULT_CACHE_HANDOUT_UNRETAINED, /* threads (issue 3): cache.c */
  FAULT_CACHE_DELETER_NO_GIL,     /* export.c: the GIL-counted deleter skips the GIL */
  /* producer, device and copy (export.c) */
  FAULT_DL_DEVICE_CPU_REFUSED,
  FAULT_COPY_FALSE_COPIES,
  /* producer, virtual stream device (vstream.c) */
  FAULT_VSTREAM_NO_WAIT,
  FAULT_VSTREAM_SYNC_ON_MINUS1,
  FAULT_VSTREAM_NONE_PER_THREAD,
  FAULT_VSTREAM_LEGACY_WRONG,
  FAULT_VSTREAM_PER_THREAD_WRONG,
  FAULT_VSTREAM_HANDLE_IGNORED,
  FAULT_VSTREAM_ACCEPTS_ZERO,
  FAULT_VSTREAM_DESTROYS_STREAM,
  FAULT_VSTREAM_CPU_NO_SYNC,
  FAULT_VSTREAM_COPY_ON_PRODUCER_STREAM,
  FAULT_VSTREAM_COPY_FALSE_COPIES,
  /* consumer, streams, device and copy (consume.c, tensor.c) */
  FAULT_CONSUMER_STREAM_FOR_CPU,
  FAULT_CONSUMER_CUDA_STREAM_ZERO,
  FAULT_CONSUMER_ROCM_STREAM_ONE,
  FAULT_CONSUMER_CPU_REQUEST_STREAM,
  FAULT_CONSUMER_CUDA_STREAM_NONE,
  FAULT_CONSUMER_FOREIGN_DEVICE_TYPEERROR,
  FAULT_CONSUMER_REFUSES_CPU_COPY,
  FAULT_CONSUMER_COPY_IGNORED,
  FAULT_CONSUMER_COPY_FALSE_COPIES,
  FAULT_CONSUMER_DEVICE_VALUEERROR,
  FAULT_CONSUMER_RESULT_DEVICE,
  FAULT_CONSUMER_COPIES_ALWAYS,
  FAULT_CONSUMER_IGNORES_STRIDES,
  /* consumer (from_dlpack) */
  FAULT_CONSUMER_NO_RENAME,
  FAULT_CONSUMER_ACCEPTS_USED,
  FAULT_CONSUMER_DOUBLE_DELETE,
  FAULT_CONSUMER_DELETE_EARLY,
  FAULT_CONSUMER_NO_DELETE,
  FAULT_CONSUMER_IGNORES_BYTE_OFFSET,
  FAULT_CONSUMER_REJECTS_NULL_STRIDES,
  FAULT_CONSUMER_READS_MAJOR2,
  FAULT_CONSUMER_NULL_DELETER_CALL,
  FAULT_CONSUMER_REJECTS_ZERO_SIZE_NULL,
  FAULT_CONSUMER_ACCEPTS_NEGATIVE_SHAPE,
  FAULT_CONSUMER_ACCEPTS_UNKNOWN_DTYPE,
  FAULT_CONSUMER_IGNORES_READONLY,
  FAULT_CONSUMER_NO_RETRY,
  FAULT_COUNT
} ref_fault_id;

typedef struct {
  const char *name;
  const char *clause;
  const char *side;        /* "producer" or "consumer" */
  int changes_export;      /* 1 when it alters what a versioned no-copy export carries:
                              the cached export is bypassed while it is active */
  const char *description;
} ref_fault_info;

extern const ref_fault_info ref_fault_table[FAULT_COUNT];

/* The active fault (FAULT_NONE when clean); written only by ref_fault_set_name. */
extern atomic_int ref_active_fault;
/* 1 when fault f is the active one. The only test a fault site makes. Inline: fault
 * sites sit on the benchmarked hand-out paths. */
static inline int ref_fault_is(ref_fault_id f) {
  return atomic_load_explicit(&ref_active_fault, memory_order_relaxed) == (int)f;
}
static inline ref_fault_id ref_fault_current(void) {
  return (ref_fault_id)atomic_load_explicit(&ref_active_fault, memory_order_relaxed);
}
/* 0, or -1 with ValueError for an unknown name. NULL clears. */
int ref_fault_set_name(const char *name);

/* ---- Tensor (tensor.c) ------------------------------------------------------------ */
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

extern PyTypeObject RefTensor_Type;
#define RefTensor_Check(o) PyObject_TypeCheck((o), &RefTensor_Type)

/* New tensor over buf (steals one reference to buf, also on failure). shape/strides are
 * copied; strides NULL means row-major. The extent must fit buf (checked: ValueError). */
RefTensor *ref_tensor_over(ref_buf *buf, char *data, uint64_t byte_offset, DLDataType dtype,
                           int32_t ndim, const int64_t *shape, const int64_t *strides,
                           int readonly);
/* Fills a DLTensor that borrows the tensor's arrays (no allocation). */
void ref_tensor_fill(const RefTensor *t, DLTensor *out);
int ref_tensor_init_type(PyObject *module);

/* ---- exports (export.c, cache.c) -------------------------------------------------- */
/* Managed structs that take their own reference to buf and copy shape/strides (NULL
 * stays NULL). manager_ctx is the struct itself. A versioned struct is refcounted (1 at
 * creation): its deleter drops one reference and frees it at zero (OWN-02), so the cached
 * export can hand the same struct out several times. Neither deleter touches Python
 * (OWN-04). NULL when out of memory (no Python error set). */
DLManagedTensorVersioned *ref_make_versioned(ref_buf *buf, const DLTensor *t, uint64_t flags);
DLManagedTensor *ref_make_legacy(ref_buf *buf, const DLTensor *t);
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
/* 1 when the calling thread holds the GIL; what PyGILState_Check answers (gil.c). */
int ref_gil_held(void);
/* A compact row-major copy of t's elements in a new buffer (NULL + MemoryError). */
ref_buf *ref_copy_compact(const RefTensor *t);
/* The flags a no-copy versioned export of t carries. */
uint64_t ref_export_flags(const RefTensor *t);
/* One hand-out of t's cached versioned export (created on first use), free-threaded
 * discipline: CAS publication and atomic counts, safe without the GIL. Never touches
 * Python; NULL only when out of memory. */
DLManagedTensorVersioned *ref_cache_handout(RefTensor *t);
/* The same with the GIL discipline: the caller holds the GIL, and no locked instruction
 * runs on the hand-out or in its deleter on a thread that holds the GIL. */
DLManagedTensorVersioned *ref_cache_handout_gil(RefTensor *t);
/* A no-copy versioned export of t (GIL held): the cached hand-out (GIL discipline, or the
 * free-threaded one where Py_GIL_DISABLED), or a fresh struct while a fault that alters
 * exports is active. NULL only when out of memory. */
DLManagedTensorVersioned *ref_export_versioned_nocopy(RefTensor *t);
/* Drops the tensor's own references to its cached exports (tensor dealloc, GIL held). */
void ref_cache_release(RefTensor *t);

/* Capsules. kind_versioned selects the struct; the destructor is the standard one
 * (CAP-05..08). apply_faults: producer faults of the capsule destructor apply. On failure
 * the struct's deleter is called and NULL returned. */
PyObject *ref_capsule_new(void *managed, const char *name, int kind_versioned,
                          int apply_faults);
PyObject *ref_tensor_dlpack(RefTensor *self, PyObject *args, PyObject *kwargs);

/* ---- exchange API (exchange_api.c) ----------------------------------------------- */
int ref_exchange_api_install(PyTypeObject *type);
/* A "dlpack_exchange_api" capsule of a second static table whose managed export bypasses
 * the cache (a fresh struct per call); the module's UNCACHED_EXCHANGE_API, for benchmarks. */
PyObject *ref_uncached_api_capsule(void);
/* Re-installs the type's attribute for the active fault (the XAPI discovery and table
 * faults); a no-op before ref_exchange_api_install. Called by ref_fault_set_name. */
void ref_exchange_api_refresh(void);
/* The clean static table (XAPI-05), whatever fault is active. */
const DLPackExchangeAPI *ref_exchange_api_table(void);
/* ApiForge (api_forge.c): forged exchange tables for consumer checks (XAPI-04/06/11). */
int ref_api_forge_init_type(PyObject *module);

/* ---- consumer (consume.c) --------------------------------------------------------- */
PyObject *ref_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs);
/* Imports an owning versioned tensor (stolen: on failure its deleter is called and NULL
 * returned with BufferError). Used by managed_tensor_to_py_object_no_sync. */
PyObject *ref_import_versioned(DLManagedTensorVersioned *m);

/* ---- virtual stream device (vstream.c) ------------------------------------------- */
/* Adds DeviceTensor, VSTREAM_DEVICE and the vstream_* functions to the module. */
int ref_vstream_init(PyObject *module);

/* ---- Forge (forge.c) -------------------------------------------------------------- */
int ref_forge_init_type(PyObject *module);

/* ---- dtype names (tensor.c) -------------------------------------------------------- */
/* Parses a dtype name or (code, bits, lanes) tuple. -1 with TypeError/ValueError. */
int ref_parse_dtype(PyObject *obj, DLDataType *out);
/* Parses a tuple/list of int64 into out (at most REF_MAX_NDIM). Returns the count or -1. */
int ref_parse_dims(PyObject *obj, const char *what, int64_t *out);
/* The same, with at most max_dims entries (out holds that many). */
int ref_parse_dims_upto(PyObject *obj, const char *what, int64_t *out, int max_dims);
PyObject *ref_dims_tuple(int32_t n, const int64_t *v);

#endif /* DLCONFORM_REF_H */
