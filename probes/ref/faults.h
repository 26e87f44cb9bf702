/* faults: the built-in faults ("mutants") of the reference and the seams they act through.
 *
 * Each fault breaks exactly one clause. The active fault is process-wide. The clean code
 * computes what the spec asks for and hands it to a seam; the seam returns what the active
 * fault makes of it, and with no fault on (or another one) the clean value unchanged:
 *   refusal   ref_refuse, ref_refusal_type   how a refusal of the clean code is raised
 *   request   ref_twist_dlpack_format, ref_twist_dlpack_request   what __dlpack__ reads
 *   export    ref_twist_export_tensor, ref_twist_export_flags, ref_twist_version,
 *             ref_twist_capsule_name, ref_twist_destructor, ref_twist_released_handout,
 *             ref_twist_tensor_device   what a Tensor exports and reports
 *   import    ref_twist_consume, ref_twist_import_header, ref_twist_import_layout,
 *             ref_twist_import_owner, ref_twist_adopted   what from_dlpack does with what
 *             it receives
 *   asking    ref_twist_request   what from_dlpack asks a producer for, and how
 *   table     ref_twist_api_attribute, ref_twist_error_reports, ref_twist_borrowed,
 *             ref_twist_cpu_work_stream   the exchange API table and its functions
 *   vstream   ref_twist_vstream_wait, ref_twist_vstream_plan   the virtual stream device
 * A fault that changes control flow (an abort, a crash, a refusal the clean code never
 * makes, a racy store, a skipped GIL) stays a one-line ref_fault_is() guard at its site.
 * No seam calls another file of the module but buffer.c: every file may call faults.
 * Included by ref.h only, after its constants and ref_buf. */
#ifndef DLCONFORM_REF_FAULTS_H
#define DLCONFORM_REF_FAULTS_H

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
  FAULT_STREAM_VERSIONED_ACCEPTED,
  FAULT_DL_DEVICE_VALUEERROR,
  FAULT_DEVICE_MISMATCH,
  FAULT_CPU_DEVICE_ID,
  FAULT_POSITIONAL_ARGS,
  FAULT_UNEXPORTABLE_TYPEERROR,
  FAULT_CACHE_NO_CAS,
  FAULT_NO_COPY_KEYWORD,
  FAULT_DESTRUCTOR_CALLS_NULL_DELETER,
  FAULT_SUBBYTE_UNFLAGGED,
  FAULT_FP6_BITS_8,
  FAULT_FP4_BITS_8,
  /* exchange API (XAPI), producer side */
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
  FAULT_XAPI_HANDOUT_VERSION,
  /* exchange API (XAPI), consumer side */
  FAULT_CONSUMER_XAPI_ON_INSTANCE,
  FAULT_CONSUMER_XAPI_IGNORES_MAJOR,
  FAULT_CONSUMER_XAPI_NULL_DLTENSOR,
  FAULT_CONSUMER_XAPI_TRUSTS_HANDOUT,
  FAULT_CACHE_HANDOUT_UNRETAINED, /* threads (issue 3) */
  FAULT_CACHE_DELETER_NO_GIL,     /* the GIL-counted deleter skips the GIL */
  /* producer, device and copy */
  FAULT_DL_DEVICE_CPU_REFUSED,
  FAULT_COPY_FALSE_COPIES,
  /* producer, virtual stream device */
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
  /* consumer, streams, device and copy */
  FAULT_CONSUMER_STREAM_FOR_CPU,
  FAULT_CONSUMER_CUDA_STREAM_ZERO,
  FAULT_CONSUMER_ROCM_STREAM_ONE,
  FAULT_CONSUMER_CPU_REQUEST_STREAM,
  FAULT_CONSUMER_CUDA_STREAM_NONE,
  FAULT_CONSUMER_FOREIGN_STREAM,
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
  FAULT_CONSUMER_RENAMES_LATE,
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
  FAULT_CONSUMER_OPAQUE_SYSTEMERROR,
  FAULT_CONSUMER_PACKED_SYSTEMERROR,
  FAULT_CONSUMER_ACCEPTS_NEGATIVE_NDIM,
  FAULT_CONSUMER_READS_NULL_SHAPE,
  FAULT_CONSUMER_TOUCHES_SPAN,
  FAULT_XAPI_HEADER_MAJOR,
  /* at interpreter exit */
  FAULT_DESTRUCTOR_DIES_AT_EXIT,
  FAULT_DELETER_DIES_AT_EXIT,
  FAULT_CONSUMER_RELEASE_DIES_AT_EXIT,
  /* exchange API on CUDA (CudaTensor, ref@cuda): cuda_* faults run on a CUDA runtime */
  FAULT_CUDA_WORK_STREAM_IGNORES_CONTEXT,
  FAULT_CUDA_FROM_PY_SYNCHRONIZES,
  FAULT_CUDA_DLTENSOR_FROM_WAITS,
  FAULT_CUDA_TO_PY_SYNCHRONIZES,
  FAULT_CUDA_CONSUMER_IGNORES_WORK_STREAM,
  FAULT_CUDA_CONSUMER_IGNORES_CONTEXT,
  FAULT_CUDA_CONSUMER_HOST_COPY_FALSE,
  FAULT_CUDA_STRIDES_IN_BYTES,
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
/* Inline: the seams and guards sit on the benchmarked hand-out paths. */
static inline ref_fault_id ref_fault_current(void) {
  return (ref_fault_id)atomic_load_explicit(&ref_active_fault, memory_order_relaxed);
}
/* 1 when fault f is the active one: the test of a control-flow guard. */
static inline int ref_fault_is(ref_fault_id f) { return ref_fault_current() == f; }
/* 1 when the active fault alters what a versioned no-copy export carries. */
static inline int ref_fault_changes_export(void) {
  return ref_fault_table[ref_fault_current()].changes_export;
}
/* 0, or -1 with ValueError for an unknown name. NULL clears. */
int ref_fault_set_name(const char *name);

/* ---- refusal ---------------------------------------------------------------------------
 * Places where the clean code refuses with BufferError and a fault raises another class or
 * accepts instead. */
typedef enum {
  REF_REFUSE_CPU_STREAM,        /* __dlpack__: an int stream for CPU memory (STR-10) */
  REF_REFUSE_CPU_STREAM_VERSIONED, /* the same with max_version given */
  REF_REFUSE_DL_DEVICE,         /* __dlpack__: a dl_device it cannot export to (DEV-05) */
  REF_REFUSE_UNEXPORTABLE,      /* __dlpack__: a tensor that cannot be exported (ERR-01) */
  REF_REFUSE_XAPI_UNEXPORTABLE, /* managed_tensor_from_py_object_no_sync: the same (XAPI-14) */
  REF_REFUSE_USED_CAPSULE,      /* from_dlpack: a capsule named used_* (CAP-04) */
  REF_REFUSE_OTHER_MAJOR,       /* from_dlpack: a version.major other than 1 (VER-08) */
  REF_REFUSE_VSTREAM_ZERO,      /* DeviceTensor.__dlpack__: stream=0 (STR-08) */
  REF_REFUSE_VSTREAM_NO_COPY,   /* DeviceTensor.__dlpack__: copy=False to the host (CPY-05) */
  REF_REFUSE_PACKED_SUBBYTE,    /* from_dlpack: packed sub-byte data (FLG-06) */
} ref_refusal;
/* The exception class raised at where (borrowed): BufferError when clean, NULL where the
 * active fault accepts instead. */
PyObject *ref_refusal_type(ref_refusal where);
/* Raises the refusal at where with message: -1, or 0 where the active fault accepts. */
int ref_refuse(ref_refusal where, const char *message);

/* ---- request: what Tensor.__dlpack__ reads -------------------------------------------- */
/* The PyArg format __dlpack__ parses its keywords with (API-01: keyword-only), and how many
 * of the four keywords (stream, max_version, dl_device, copy) it takes, in that order. */
const char *ref_twist_dlpack_format(const char *clean, int *keywords);

/* The export __dlpack__ was asked for, as the clean code reads the keywords. */
typedef struct {
  int versioned;        /* a versioned capsule (VER-02..04) */
  int max_version_none; /* max_version was None */
  int copy;             /* export a copy: copy=True (CPY-01) */
  int copy_false;       /* copy=False was given: never a copy (CPY-02) */
} ref_dlpack_request;
void ref_twist_dlpack_request(ref_dlpack_request *r);

/* ---- export: what a Tensor exports and reports ---------------------------------------- */
/* The DLTensor of an export (LAY-04..06, DT-03, DEV-02, DEV-03). scratch holds
 * REF_MAX_NDIM entries for twisted strides. */
void ref_twist_export_tensor(DLTensor *dl, int versioned, int64_t *scratch);
/* The flags of an export (FLG-01, FLG-02, FLG-04). */
uint64_t ref_twist_export_flags(uint64_t flags);
/* The version a versioned export carries (VER-07). */
DLPackVersion ref_twist_version(DLPackVersion clean);
/* The name of a Tensor capsule (CAP-01, CAP-02). */
const char *ref_twist_capsule_name(const char *clean, int versioned);
/* Whether a Tensor capsule's destructor calls the deleter (CAP-05, CAP-06). */
int ref_twist_destructor(int calls_deleter);
/* 1 while the interpreter finalises (module globals being cleared at exit) */
#if PY_VERSION_HEX >= 0x030D0000
#define ref_interpreter_finalizing() Py_IsFinalizing()
#else
#define ref_interpreter_finalizing() _Py_IsFinalizing()
#endif
/* The exit faults: the process dies (SIGSEGV, as a use of torn-down state would) where the
 * destructor (CAP-05), a producer's deleter (OWN-04) or the consumer's release of an import
 * (OWN-03) runs while the interpreter finalises. `where` is that fault. */
void ref_twist_at_exit(ref_fault_id where);
/* What releasing one hand-out of a cached export leaves in the shared struct's n dims
 * (shape then strides): untouched while others hold it (OWN-05). */
void ref_twist_released_handout(int64_t *dims, size_t n);
/* The device a tensor reports (DEV-02); imported: a from_dlpack result (API-05). */
DLDevice ref_twist_tensor_device(DLDevice clean, int imported);

/* ---- import: what from_dlpack does with what it receives ------------------------------ */
/* How a capsule is consumed. */
typedef struct {
  int copy;         /* return a private copy (CPY-06, SEM-01) */
  int rename;       /* rename it used_* (CAP-03) */
  int rename_late;  /* rename only once the import succeeded; a refusal still gives the
                       tensor back (OWN-03: the capsule's destructor then calls it again) */
} ref_consume_rules;
void ref_twist_consume(ref_consume_rules *c);

/* A managed tensor as the consumer reads it once its version is accepted (VER-08). */
typedef struct {
  uint64_t flags;
  dlc_dtype_info dtype; /* .valid: the 1.3 vocabulary (VER-09) */
  DLTensor dl;          /* shape and strides point at the arrays below once they are read */
  int64_t shape[REF_MAX_NDIM];
  int64_t strides[REF_MAX_NDIM];
} ref_import;
/* Its flags, dtype and ndim, before the rest of it is checked (FLG-03, LAY-09, VER-09). */
void ref_twist_import_header(ref_import *im);
/* Its layout, once ndim is in range and shape and strides are the import's own copies
 * (LAY-03, LAY-09, LAY-11). */
void ref_twist_import_layout(ref_import *im);
/* The deleter accounting of an import's buffer, set up clean by ref_buf_foreign: the last
 * release calls a non-NULL deleter once (OWN-01, OWN-03). */
void ref_twist_import_owner(ref_buf *b);
/* The tensor from_dlpack imports from an exchange table's managed_tensor_from_py_object_no_sync:
 * m itself, whose version is checked like a capsule's (VER-08), or NULL with MemoryError
 * set. m is not NULL. */
DLManagedTensorVersioned *ref_twist_handout(DLManagedTensorVersioned *m);
/* The tensor managed_tensor_to_py_object_no_sync adopts: m itself (stolen, XAPI-17), or
 * NULL with MemoryError set. m is not NULL. */
DLManagedTensorVersioned *ref_twist_adopted(DLManagedTensorVersioned *m);

/* ---- asking: what from_dlpack asks a producer for -------------------------------------- */
typedef struct {
  long dev_type;               /* the producer's device type (API-04) */
  int want_device;             /* device="cpu" or (kDLCPU, 0) was given */
  PyObject *copy;              /* the copy keyword passed on (borrowed) */
  int stream_given;            /* 0: stream=None (STR-10, STR-12, STR-14) */
  long stream;                 /* the stream passed when stream_given */
  PyObject *refusal;           /* set: refuse with it instead of asking (borrowed) */
  const char *refusal_message;
  PyObject *host_copy_refusal; /* set: the class a producer's BufferError for the host copy
                                  becomes (borrowed); NULL: it propagates */
  int retry;                   /* retry without the new keywords on TypeError (VER-06) */
  int xapi;                    /* try the exchange API first (CPU producers) */
  int xapi_on_instance;        /* look its table up on the object, not its type (XAPI-04) */
  int xapi_check_major;        /* use only a table of our major (XAPI-06) */
  int xapi_check_dltensor;     /* NULL-check dltensor_from_py_object_no_sync (XAPI-11) */
} ref_request;
void ref_twist_request(ref_request *r);

/* ---- table: the exchange API table and its functions ----------------------------------- */
/* The type attribute offering clean (XAPI-01..03, 05, 07..12): *name and *value hold the
 * clean attribute (value a new reference) and may be replaced. -1 with an exception, having
 * dropped *value. */
int ref_twist_api_attribute(const DLPackExchangeAPI *clean, const char **name,
                            PyObject **value);
/* How often a failing allocator calls SetError (XAPI-13). */
int ref_twist_error_reports(int clean);
/* The DLTensor dltensor_from_py_object_no_sync fills, borrowing memory [lo, hi) (XAPI-15):
 * 0, or -1 with MemoryError. */
int ref_twist_borrowed(DLTensor *out, uintptr_t lo, uintptr_t hi);
/* A fresh struct that managed_tensor_from_py_object_no_sync hands out, as it goes out: its
 * version is the producer's, as in its capsules (VER-07). */
void ref_twist_xapi_handout(DLManagedTensorVersioned *m);
/* The stream current_work_stream writes for kDLCPU (XAPI-16). */
void *ref_twist_cpu_work_stream(void *clean);

/* ---- vstream: the virtual stream device ------------------------------------------------ */
#define REF_VSTREAM_LEGACY 1     /* CUDA's legacy default stream (STR-05) */
#define REF_VSTREAM_PER_THREAD 2 /* CUDA's per-thread default stream (STR-06) */
/* The consumer stream an export waits on, read from the stream argument (stream_none: it
 * was None): > 0 a stream, 0 none (STR-03), -1 an error (STR-04..07). */
long ref_twist_vstream_wait(long wait, int stream_none);
/* What one export does on the streams, in this order. */
typedef struct {
  int to_host;   /* dl_device=(kDLCPU, 0): a host copy (STR-12) */
  long wait;     /* > 0: this consumer stream waits on the producer's (STR-01) */
  int sync;      /* the producer's stream is synchronised (STR-12) */
  int copy;      /* a copy runs ... */
  long copy_on;  /* ... on this stream, 0 for the host (CPY-04) */
  long destroy;  /* > 0: this stream is destroyed; never in the clean plan (STR-11) */
} ref_vstream_plan;
void ref_twist_vstream_plan(ref_vstream_plan *p, long own);

#endif /* DLCONFORM_REF_FAULTS_H */
