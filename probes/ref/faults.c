/* faults: built-in mutants of the reference. Each breaks exactly one clause, on the
 * producer side (Tensor.__dlpack__, its capsules and its cached export) or the consumer
 * side (from_dlpack and managed_tensor_to_py_object_no_sync). The active fault is
 * process-wide. Every fault site is a single ref_fault_is() test; with the fault off the
 * site behaves exactly as the clean code. */
#include "ref.h"

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
    [FAULT_CONSUMER_NO_RENAME] = {"consumer_no_rename", "CAP-03", C, 0,
        "from_dlpack does not rename the capsule it consumes"},
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
        "from_dlpack rejects NULL strides in legacy capsules"},
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
};

static atomic_int active_fault = FAULT_NONE;

int ref_fault_is(ref_fault_id f) {
  return atomic_load_explicit(&active_fault, memory_order_relaxed) == (int)f;
}

ref_fault_id ref_fault_current(void) {
  return (ref_fault_id)atomic_load_explicit(&active_fault, memory_order_relaxed);
}

int ref_fault_set_name(const char *name) {
  if (!name || !*name) {
    atomic_store(&active_fault, FAULT_NONE);
    return 0;
  }
  for (int f = 1; f < FAULT_COUNT; f++) {
    if (strcmp(ref_fault_table[f].name, name) == 0) {
      atomic_store(&active_fault, f);
      return 0;
    }
  }
  PyErr_Format(PyExc_ValueError, "unknown fault '%s'", name);
  return -1;
}
