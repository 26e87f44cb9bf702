/* faults: the catalogue of built-in faults ("mutants"), the active one, and the refusal
 * seam. Each fault breaks exactly one clause, on the producer side (Tensor.__dlpack__, its
 * capsules, its cached export, the exchange API table, DeviceTensor) or the consumer side
 * (from_dlpack and managed_tensor_to_py_object_no_sync). Faults act through the seams of
 * faults.h: this file, faults_producer.c, faults_consumer.c and faults_xapi.c. */
#include "ref.h"

#include <signal.h>
#include <string.h>

#define P "producer"
#define C "consumer"

const ref_fault_info ref_fault_table[FAULT_COUNT] = {
    [FAULT_NONE] = {NULL, NULL, NULL, 0, NULL},
    [FAULT_LEGACY_CAPSULE_NAME] = {"legacy_capsule_name", "CAP-01", P, 0,
        "legacy capsules are named \"DLTensor\" instead of \"dltensor\""},
    [FAULT_VERSIONED_CAPSULE_NAME] = {"versioned_capsule_name", "CAP-02", P, 0,
        "versioned capsules are named \"dltensor-versioned\""},
    [FAULT_DESTRUCTOR_LEAKS] = {"destructor_leaks", "CAP-05", P, 0,
        "the capsule destructor never calls the deleter of an unconsumed capsule"},
    [FAULT_XAPI_HEADER_MAJOR] = {"xapi_header_major", "XAPI-06", P, 0,
        "the exchange table's header says version (2, 0), a major every 1.x consumer refuses"},
    [FAULT_DESTRUCTOR_DIES_AT_EXIT] = {"destructor_dies_at_exit", "CAP-05", P, 0,
        "the capsule destructor dies when it runs as the interpreter finalises"},
    [FAULT_DELETER_DIES_AT_EXIT] = {"deleter_dies_at_exit", "OWN-04", P, 0,
        "the deleter of an export dies when it is called as the interpreter finalises"},
    [FAULT_CONSUMER_RELEASE_DIES_AT_EXIT] = {"consumer_release_dies_at_exit", "OWN-03", C, 0,
        "an imported result dies giving its tensor back as the interpreter finalises"},
    [FAULT_DESTRUCTOR_IGNORES_USED] = {"destructor_ignores_used", "CAP-06", P, 0,
        "the capsule destructor calls the deleter even when the capsule was renamed used_*"},
    [FAULT_VERSION_WRONG] = {"version_wrong", "VER-07", P, 1,
        "versioned exports carry version (0, 0) instead of (1, 3)"},
    [FAULT_IGNORE_MAX_VERSION] = {"ignore_max_version", "VER-02", P, 0,
        "max_version=None still gives a versioned capsule"},
    [FAULT_OLD_MAJOR_VERSIONED] = {"old_major_versioned", "VER-04", P, 0,
        "max_version=(0, x) gives a versioned capsule instead of a legacy one"},
    [FAULT_READONLY_UNFLAGGED] = {"readonly_unflagged", "FLG-02", P, 1,
        "a read-only tensor is exported without READ_ONLY"},
    [FAULT_COPY_UNFLAGGED] = {"copy_unflagged", "FLG-04", P, 0,
        "copy=True copies but does not set IS_COPIED"},
    [FAULT_UNDEFINED_FLAG] = {"undefined_flag", "FLG-01", P, 1,
        "versioned exports set the undefined flag bit 1<<7"},
    [FAULT_COPY_IGNORED] = {"copy_ignored", "CPY-01", P, 0,
        "copy=True exports the tensor's own memory (no copy, no IS_COPIED)"},
    [FAULT_BYTE_STRIDES] = {"byte_strides", "LAY-05", P, 1,
        "strides are exported in bytes instead of elements"},
    [FAULT_NULL_STRIDES] = {"null_strides", "LAY-06", P, 1,
        "versioned 1.3 exports with ndim > 0 have NULL strides"},
    [FAULT_ZERO_SIZE_DATA] = {"zero_size_data", "LAY-04", P, 1,
        "zero-size exports have a non-NULL data pointer"},
    [FAULT_BOOL_BITS] = {"bool_bits", "DT-03", P, 1,
        "bool is exported with bits 1 instead of 8"},
    [FAULT_STREAM_ACCEPTED] = {"stream_accepted", "STR-10", P, 0,
        "an int stream is accepted on CPU instead of raising BufferError"},
    [FAULT_STREAM_SYSTEMERROR] = {"stream_systemerror", "STR-10", P, 0,
        "an int stream on CPU is refused with SystemError (a broken C API call) instead of "
        "BufferError"},
    [FAULT_STREAM_VERSIONED_ACCEPTED] = {"stream_versioned_accepted", "STR-10", P, 0,
        "an int stream on CPU is refused only when max_version is None: versioned exports "
        "accept it"},
    [FAULT_DL_DEVICE_VALUEERROR] = {"dl_device_valueerror", "DEV-05", P, 0,
        "an unsupported dl_device raises ValueError instead of BufferError"},
    [FAULT_DEVICE_MISMATCH] = {"device_mismatch", "DEV-03", P, 1,
        "capsules say device (kDLCUDAHost, 0) while __dlpack_device__ says (1, 0)"},
    [FAULT_CPU_DEVICE_ID] = {"cpu_device_id", "DEV-02", P, 1,
        "the tensor reports and exports CPU device_id 1 instead of 0"},
    [FAULT_POSITIONAL_ARGS] = {"positional_args", "API-01", P, 0,
        "__dlpack__ accepts its arguments positionally"},
    [FAULT_UNEXPORTABLE_TYPEERROR] = {"unexportable_typeerror", "ERR-01", P, 0,
        "an unexportable tensor raises TypeError instead of BufferError"},
    [FAULT_CACHE_NO_CAS] = {"cache_no_cas", "OWN-05", P, 0,
        "the cached export is stored with a plain racy store instead of a compare-and-swap "
        "(a data race for TSan; racing exports lose the tensor's reference)"},
    [FAULT_NO_COPY_KEYWORD] = {"no_copy_keyword", "API-01", P, 0,
        "__dlpack__ takes stream, max_version and dl_device but not copy (a partial 2023.12 "
        "signature)"},
    [FAULT_DESTRUCTOR_CALLS_NULL_DELETER] = {"destructor_calls_null_deleter", "CAP-07", P, 0,
        "the capsule destructor calls the deleter without checking it for NULL (crashes)"},
    [FAULT_SUBBYTE_UNFLAGGED] = {"subbyte_unflagged", "FLG-06", P, 1,
        "padded sub-byte exports do not set IS_SUBBYTE_TYPE_PADDED"},
    [FAULT_FP6_BITS_8] = {"fp6_bits_8", "DT-07", P, 1,
        "fp6 is exported with bits 8 (its padded storage) instead of 6"},
    [FAULT_FP4_BITS_8] = {"fp4_bits_8", "DT-08", P, 1,
        "fp4 is exported with bits 8 (its padded storage) instead of 4"},
    /* exchange API (XAPI): table and discovery faults re-install the type's attribute
     * when they are set (module.c). */
    [FAULT_XAPI_ON_INSTANCE] = {"xapi_on_instance", "XAPI-01", P, 0,
        "the type holds a descriptor; only instances give the exchange API capsule"},
    [FAULT_XAPI_CAPSULE_NAME] = {"xapi_capsule_name", "XAPI-02", P, 0,
        "the exchange API capsule is named \"dlpack_exchange_api_v1\""},
    [FAULT_XAPI_INT_FORM] = {"xapi_int_form", "XAPI-03", P, 0,
        "the table is offered only as the superseded v1.2 int __c_dlpack_exchange_api__"},
    [FAULT_XAPI_TABLE_PER_LOOKUP] = {"xapi_table_per_lookup", "XAPI-05", P, 0,
        "each lookup of the attribute gives a new heap table, freed with its capsule"},
    [FAULT_XAPI_PREV_API_GARBAGE] = {"xapi_prev_api_garbage", "XAPI-07", P, 0,
        "header.prev_api points at junk (a header with major 7) instead of NULL"},
    [FAULT_XAPI_NULL_ALLOCATOR] = {"xapi_null_allocator", "XAPI-08", P, 0,
        "managed_tensor_allocator is NULL"},
    [FAULT_XAPI_NULL_FROM_PY] = {"xapi_null_from_py", "XAPI-09", P, 0,
        "managed_tensor_from_py_object_no_sync is NULL"},
    [FAULT_XAPI_NULL_TO_PY] = {"xapi_null_to_py", "XAPI-10", P, 0,
        "managed_tensor_to_py_object_no_sync is NULL"},
    [FAULT_XAPI_NULL_STREAM] = {"xapi_null_stream", "XAPI-12", P, 0,
        "current_work_stream is NULL"},
    [FAULT_XAPI_ALLOC_SILENT_FAILURE] = {"xapi_alloc_silent_failure", "XAPI-13", P, 0,
        "the allocator fails without calling SetError"},
    [FAULT_XAPI_ALLOC_DOUBLE_SETERROR] = {"xapi_alloc_double_seterror", "XAPI-13", P, 0,
        "the allocator calls SetError twice when it fails"},
    [FAULT_XAPI_FROM_PY_NO_TYPECHECK] = {"xapi_from_py_no_typecheck", "XAPI-14", P, 0,
        "managed_tensor_from_py_object_no_sync reads any object as a Tensor (crashes)"},
    [FAULT_XAPI_FROM_PY_RUNTIMEERROR] = {"xapi_from_py_runtimeerror", "XAPI-14", P, 0,
        "managed_tensor_from_py_object_no_sync raises RuntimeError, not BufferError, for "
        "data it cannot describe"},
    [FAULT_XAPI_DLTENSOR_COPIES] = {"xapi_dltensor_copies", "XAPI-15", P, 0,
        "dltensor_from_py_object_no_sync fills data with a temporary copy (leaked)"},
    [FAULT_XAPI_STREAM_CPU_NONNULL] = {"xapi_stream_cpu_nonnull", "XAPI-16", P, 0,
        "current_work_stream writes a non-NULL stream for kDLCPU"},
    [FAULT_XAPI_TO_PY_NO_STEAL] = {"xapi_to_py_no_steal", "XAPI-17", P, 0,
        "managed_tensor_to_py_object_no_sync copies and never calls the tensor's deleter"},
    [FAULT_XAPI_ABORT_BAD_DEVICE] = {"xapi_abort_bad_device", "XAPI-18", P, 0,
        "the allocator aborts (as an escaped C++ exception would) on a device it lacks"},
    [FAULT_XAPI_HANDOUT_VERSION] = {"xapi_handout_version", "VER-07", P, 1,
        "managed_tensor_from_py_object_no_sync hands out tensors stamped (1, 0) while the "
        "capsules say (1, 3)"},
    [FAULT_CONSUMER_XAPI_ON_INSTANCE] = {"consumer_xapi_on_instance", "XAPI-04", C, 0,
        "from_dlpack looks the exchange API up on the instance, not the type"},
    [FAULT_CONSUMER_XAPI_IGNORES_MAJOR] = {"consumer_xapi_ignores_major", "XAPI-06", C, 0,
        "from_dlpack uses an exchange table whatever its header major"},
    [FAULT_CONSUMER_XAPI_NULL_DLTENSOR] = {"consumer_xapi_null_dltensor", "XAPI-11", C, 0,
        "from_dlpack(copy=True) calls dltensor_from_py_object_no_sync without a NULL check"},
    [FAULT_CONSUMER_XAPI_TRUSTS_HANDOUT] = {"consumer_xapi_trusts_handout", "VER-08", C, 0,
        "from_dlpack imports a tensor an exchange table of major 1 hands out without checking "
        "the tensor's own version.major"},
    [FAULT_DL_DEVICE_CPU_REFUSED] = {"dl_device_cpu_refused", "DEV-06", P, 0,
        "dl_device=(kDLCPU, 0) raises BufferError on a CPU tensor"},
    [FAULT_COPY_FALSE_COPIES] = {"copy_false_copies", "CPY-02", P, 0,
        "copy=False exports a copy (with IS_COPIED)"},
    /* exchange API on CUDA: CudaTensor's table, on the CUDA runtime ref is bound to */
    [FAULT_CUDA_WORK_STREAM_IGNORES_CONTEXT] = {"cuda_work_stream_ignores_context", "XAPI-16", P, 0,
        "current_work_stream(kDLCUDA) gives the legacy default stream even inside a "
        "cuda_stream() context"},
    [FAULT_CUDA_FROM_PY_SYNCHRONIZES] = {"cuda_from_py_synchronizes", "XAPI-14", P, 0,
        "managed_tensor_from_py_object_no_sync synchronizes the tensor's stream (blocks the "
        "host)"},
    [FAULT_CUDA_DLTENSOR_FROM_WAITS] = {"cuda_dltensor_from_waits", "XAPI-15", P, 0,
        "dltensor_from_py_object_no_sync makes the current stream wait on the tensor's stream"},
    [FAULT_CUDA_TO_PY_SYNCHRONIZES] = {"cuda_to_py_synchronizes", "XAPI-17", P, 0,
        "managed_tensor_to_py_object_no_sync synchronizes the whole device"},
    [FAULT_CUDA_CONSUMER_IGNORES_WORK_STREAM] = {"cuda_consumer_ignores_work_stream", "XAPI-19", C, 0,
        "cuda_from_dlpack, through a producer's exchange table, reads on its own current "
        "stream without asking current_work_stream"},
    [FAULT_CUDA_CONSUMER_IGNORES_CONTEXT] = {"cuda_consumer_ignores_context", "STR-07", C, 0,
        "cuda_from_dlpack names the legacy default stream (1) to __dlpack__ even inside a "
        "cuda_stream() context"},
    [FAULT_CUDA_CONSUMER_HOST_COPY_FALSE] = {"cuda_consumer_host_copy_false", "CPY-07", C, 0,
        "cuda_from_dlpack(device='cpu', copy=False) asks the producer for a host copy anyway "
        "and imports it"},
    [FAULT_CUDA_STRIDES_IN_BYTES] = {"cuda_strides_in_bytes", "LAY-05", P, 0,
        "CudaTensor's exports give their strides in bytes, not elements"},
    [FAULT_VSTREAM_NO_WAIT] = {"vstream_no_wait", "STR-01", P, 0,
        "the virtual stream device never makes the consumer's stream wait"},
    [FAULT_VSTREAM_SYNC_ON_MINUS1] = {"vstream_sync_on_minus1", "STR-03", P, 0,
        "stream=-1 still synchronises the producer's stream"},
    [FAULT_VSTREAM_NONE_PER_THREAD] = {"vstream_none_per_thread", "STR-04", P, 0,
        "stream=None waits on the per-thread default stream instead of the legacy one"},
    [FAULT_VSTREAM_LEGACY_WRONG] = {"vstream_legacy_wrong", "STR-05", P, 0,
        "stream=1 waits on the per-thread default stream"},
    [FAULT_VSTREAM_PER_THREAD_WRONG] = {"vstream_per_thread_wrong", "STR-06", P, 0,
        "stream=2 waits on the legacy default stream"},
    [FAULT_VSTREAM_HANDLE_IGNORED] = {"vstream_handle_ignored", "STR-07", P, 0,
        "a stream handle > 2 is ignored: the wait goes to the legacy default stream"},
    [FAULT_VSTREAM_ACCEPTS_ZERO] = {"vstream_accepts_zero", "STR-08", P, 0,
        "stream=0 is accepted (as the legacy default stream) instead of rejected"},
    [FAULT_VSTREAM_DESTROYS_STREAM] = {"vstream_destroys_stream", "STR-11", P, 0,
        "the producer destroys the consumer's stream after making it wait"},
    [FAULT_VSTREAM_CPU_NO_SYNC] = {"vstream_cpu_no_sync", "STR-12", P, 0,
        "dl_device=(kDLCPU, 0) copies to the host without synchronising"},
    [FAULT_VSTREAM_COPY_ON_PRODUCER_STREAM] = {"vstream_copy_on_producer_stream", "CPY-04", P, 0,
        "copy=True runs the copy on the producer's stream, not the consumer's"},
    [FAULT_VSTREAM_COPY_FALSE_COPIES] = {"vstream_copy_false_copies", "CPY-05", P, 0,
        "dl_device=(kDLCPU, 0) with copy=False copies instead of raising BufferError"},
    [FAULT_CONSUMER_STREAM_FOR_CPU] = {"consumer_stream_for_cpu", "STR-10", C, 0,
        "from_dlpack passes stream=-1 to a CPU producer"},
    [FAULT_CONSUMER_CUDA_STREAM_ZERO] = {"consumer_cuda_stream_zero", "STR-08", C, 0,
        "from_dlpack passes stream=0 to a CUDA producer"},
    [FAULT_CONSUMER_ROCM_STREAM_ONE] = {"consumer_rocm_stream_one", "STR-09", C, 0,
        "from_dlpack passes stream=1 to a ROCm producer"},
    [FAULT_CONSUMER_CPU_REQUEST_STREAM] = {"consumer_cpu_request_stream", "STR-12", C, 0,
        "from_dlpack passes stream=-1 together with dl_device=(kDLCPU, 0)"},
    [FAULT_CONSUMER_CUDA_STREAM_NONE] = {"consumer_cuda_stream_none", "STR-14", C, 0,
        "from_dlpack asks a CUDA producer for an export with stream=None"},
    [FAULT_CONSUMER_FOREIGN_STREAM] = {"consumer_foreign_stream", "STR-15", C, 0,
        "from_dlpack asks producers on devices other than CPU, CUDA and ROCm for an export "
        "with stream=0 before refusing them"},
    [FAULT_CONSUMER_FOREIGN_DEVICE_TYPEERROR] = {"consumer_foreign_device_typeerror", "DEV-07", C, 0,
        "from_dlpack raises TypeError, not BufferError, for memory on a device it lacks"},
    [FAULT_CONSUMER_REFUSES_CPU_COPY] = {"consumer_refuses_cpu_copy", "DEV-06", C, 0,
        "from_dlpack(device='cpu') refuses a non-CPU producer without asking it for a copy"},
    [FAULT_CONSUMER_COPY_IGNORED] = {"consumer_copy_ignored", "CPY-06", C, 0,
        "from_dlpack(copy=True) returns a view of the producer's memory"},
    [FAULT_CONSUMER_COPY_FALSE_COPIES] = {"consumer_copy_false_copies", "CPY-07", C, 0,
        "from_dlpack(device='cpu', copy=False) copies a non-CPU tensor instead of raising"},
    [FAULT_CONSUMER_DEVICE_VALUEERROR] = {"consumer_device_valueerror", "CPY-08", C, 0,
        "from_dlpack(device='cpu') raises ValueError when the producer cannot reach the host"},
    [FAULT_CONSUMER_RESULT_DEVICE] = {"consumer_result_device", "API-05", C, 0,
        "imported tensors report device (kDLCUDAHost, 0) instead of the producer's"},
    [FAULT_CONSUMER_COPIES_ALWAYS] = {"consumer_copies_always", "SEM-01", C, 0,
        "from_dlpack copies even when a zero-copy view is possible"},
    [FAULT_CONSUMER_IGNORES_STRIDES] = {"consumer_ignores_strides", "LAY-11", C, 0,
        "from_dlpack reads every tensor as compact row-major, ignoring its strides"},
    [FAULT_CACHE_HANDOUT_UNRETAINED] = {"cache_handout_unretained", "OWN-05", P, 0,
        "releasing one cached hand-out scribbles 0xA5 over the shared struct's shape and "
        "strides, as a premature free would, while other hand-outs still use it"},
    [FAULT_CACHE_DELETER_NO_GIL] = {"cache_deleter_no_gil", "OWN-04", P, 0,
        "the deleter of a GIL-counted cached hand-out drops its count without taking the "
        "GIL on a thread that lacks it (a data race for TSan; counts can be lost)"},
    [FAULT_CONSUMER_NO_RENAME] = {"consumer_no_rename", "CAP-03", C, 0,
        "from_dlpack does not rename the capsule it consumes"},
    [FAULT_CONSUMER_RENAMES_LATE] = {"consumer_renames_late", "OWN-03", C, 0,
        "from_dlpack renames a capsule only after a successful import, but a refusal still "
        "calls the deleter: the capsule's destructor calls it again"},
    [FAULT_CONSUMER_ACCEPTS_USED] = {"consumer_accepts_used", "CAP-04", C, 0,
        "from_dlpack imports a capsule already named used_*"},
    [FAULT_CONSUMER_DOUBLE_DELETE] = {"consumer_double_delete", "OWN-03", C, 0,
        "the imported tensor's deleter is called twice when the result dies"},
    [FAULT_CONSUMER_DELETE_EARLY] = {"consumer_delete_early", "OWN-03", C, 0,
        "the deleter is called at import, while the result still views the memory"},
    [FAULT_CONSUMER_NO_DELETE] = {"consumer_no_delete", "OWN-03", C, 0,
        "the deleter is never called"},
    [FAULT_CONSUMER_IGNORES_BYTE_OFFSET] = {"consumer_ignores_byte_offset", "LAY-03", C, 0,
        "from_dlpack ignores byte_offset"},
    [FAULT_CONSUMER_REJECTS_NULL_STRIDES] = {"consumer_rejects_null_strides", "LAY-07", C, 0,
        "from_dlpack rejects NULL strides in legacy capsules, and in 0-d tensors (LAY-08)"},
    [FAULT_CONSUMER_READS_MAJOR2] = {"consumer_reads_major2", "VER-08", C, 0,
        "from_dlpack imports a tensor whose version.major is not 1"},
    [FAULT_CONSUMER_NULL_DELETER_CALL] = {"consumer_null_deleter_call", "OWN-01", C, 0,
        "from_dlpack calls a NULL deleter (crashes)"},
    [FAULT_CONSUMER_REJECTS_ZERO_SIZE_NULL] = {"consumer_rejects_zero_size_null", "LAY-04", C, 0,
        "from_dlpack rejects NULL data for a zero-size tensor"},
    [FAULT_CONSUMER_ACCEPTS_NEGATIVE_SHAPE] = {"consumer_accepts_negative_shape", "LAY-09", C, 0,
        "from_dlpack does not reject negative extents"},
    [FAULT_CONSUMER_ACCEPTS_UNKNOWN_DTYPE] = {"consumer_accepts_unknown_dtype", "VER-09", C, 0,
        "from_dlpack imports dtype codes it does not know"},
    [FAULT_CONSUMER_IGNORES_READONLY] = {"consumer_ignores_readonly", "FLG-03", C, 0,
        "the result of a READ_ONLY import is writable"},
    [FAULT_CONSUMER_NO_RETRY] = {"consumer_no_retry", "VER-06", C, 0,
        "from_dlpack does not retry without the new keywords on TypeError"},
    [FAULT_CONSUMER_OPAQUE_SYSTEMERROR] = {"consumer_opaque_systemerror", "DT-11", C, 0,
        "from_dlpack refuses kDLOpaqueHandle tensors with SystemError (a broken C API call)"},
    [FAULT_CONSUMER_PACKED_SYSTEMERROR] = {"consumer_packed_systemerror", "FLG-06", C, 0,
        "from_dlpack refuses packed sub-byte data with SystemError (a broken C API call) instead "
        "of BufferError"},
    [FAULT_CONSUMER_ACCEPTS_NEGATIVE_NDIM] = {"consumer_accepts_negative_ndim", "LAY-09", C, 0,
        "from_dlpack imports a tensor of negative ndim as 0-d"},
    [FAULT_CONSUMER_READS_NULL_SHAPE] = {"consumer_reads_null_shape", "LAY-09", C, 0,
        "from_dlpack reads the shape of ndim > 0 without a NULL check (crashes)"},
    [FAULT_CONSUMER_TOUCHES_SPAN] = {"consumer_touches_span", "LAY-09", C, 0,
        "from_dlpack reads the last byte an import spans, trusting the shape (crashes on a shape "
        "beyond the producer's memory)"},
};

atomic_int ref_active_fault = FAULT_NONE;

int ref_fault_set_name(const char *name) {
  if (!name || !*name) {
    atomic_store(&ref_active_fault, FAULT_NONE);
    return 0;
  }
  for (int f = 1; f < FAULT_COUNT; f++) {
    if (strcmp(ref_fault_table[f].name, name) == 0) {
      atomic_store(&ref_active_fault, f);
      return 0;
    }
  }
  PyErr_Format(PyExc_ValueError, "unknown fault '%s'", name);
  return -1;
}

/* ---- refusal ---------------------------------------------------------------------------
 * The faults that change a refusal of the clean code: the class they raise instead, or
 * NULL where they accept. */
static const struct {
  ref_refusal where;
  ref_fault_id fault;
  PyObject **raises;
} refusal_twists[] = {
    {REF_REFUSE_CPU_STREAM, FAULT_STREAM_ACCEPTED, NULL},
    {REF_REFUSE_CPU_STREAM, FAULT_STREAM_SYSTEMERROR, &PyExc_SystemError},
    {REF_REFUSE_CPU_STREAM_VERSIONED, FAULT_STREAM_ACCEPTED, NULL},
    {REF_REFUSE_CPU_STREAM_VERSIONED, FAULT_STREAM_SYSTEMERROR, &PyExc_SystemError},
    {REF_REFUSE_CPU_STREAM_VERSIONED, FAULT_STREAM_VERSIONED_ACCEPTED, NULL},
    {REF_REFUSE_DL_DEVICE, FAULT_DL_DEVICE_VALUEERROR, &PyExc_ValueError},
    {REF_REFUSE_UNEXPORTABLE, FAULT_UNEXPORTABLE_TYPEERROR, &PyExc_TypeError},
    {REF_REFUSE_XAPI_UNEXPORTABLE, FAULT_XAPI_FROM_PY_RUNTIMEERROR, &PyExc_RuntimeError},
    {REF_REFUSE_USED_CAPSULE, FAULT_CONSUMER_ACCEPTS_USED, NULL},
    {REF_REFUSE_OTHER_MAJOR, FAULT_CONSUMER_READS_MAJOR2, NULL},
    {REF_REFUSE_VSTREAM_ZERO, FAULT_VSTREAM_ACCEPTS_ZERO, NULL},
    {REF_REFUSE_VSTREAM_NO_COPY, FAULT_VSTREAM_COPY_FALSE_COPIES, NULL},
    {REF_REFUSE_PACKED_SUBBYTE, FAULT_CONSUMER_PACKED_SYSTEMERROR, &PyExc_SystemError},
};

PyObject *ref_refusal_type(ref_refusal where) {
  ref_fault_id f = ref_fault_current();
  for (size_t i = 0; i < sizeof refusal_twists / sizeof *refusal_twists; i++)
    if (refusal_twists[i].where == where && refusal_twists[i].fault == f)
      return refusal_twists[i].raises ? *refusal_twists[i].raises : NULL;
  return PyExc_BufferError;
}

int ref_refuse(ref_refusal where, const char *message) {
  PyObject *type = ref_refusal_type(where);
  if (!type) return 0;
  PyErr_SetString(type, message);
  return -1;
}

/* The exit faults (CAP-05, OWN-03, OWN-04), called by the capsule destructor, the deleters and
 * the Tensor's dealloc. */
void ref_twist_at_exit(ref_fault_id where) {
  if (ref_fault_is(where) && ref_interpreter_finalizing()) raise(SIGSEGV); /* CAP-05, OWN-03/04 */
}
