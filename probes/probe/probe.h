/* probe.h: internal declarations shared by the files of the `dlconform._probe` module.
 *
 * Trust model: everything a producer hands us is untrusted. A pointer is only followed
 * after the capsule name says what it points to (CAP-01, CAP-02), a `used_*` capsule is
 * never dereferenced (CAP-04), ndim is capped before shape/strides are read (LAY-09),
 * element bytes are read only after `dlc_extent_of` says the layout is sane, and a
 * versioned struct whose major differs from ours is read only up to `flags` (VER-08,
 * VER-10).
 */
#ifndef DLCONFORM_PROBE_H
#define DLCONFORM_PROBE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "check.h"

/* Largest ndim whose shape/strides we are willing to read from a producer. */
#define PROBE_MAX_NDIM 1024

/* The static capsule names (CAP-09: names must be statically allocated; these are). */
extern const char PROBE_NAME_LEGACY[];           /* "dltensor" */
extern const char PROBE_NAME_VERSIONED[];        /* "dltensor_versioned" */
extern const char PROBE_NAME_USED_LEGACY[];      /* "used_dltensor" */
extern const char PROBE_NAME_USED_VERSIONED[];   /* "used_dltensor_versioned" */

/* ---- capsule.c --------------------------------------------------------------------- */

typedef enum {
  PROBE_KIND_LEGACY = 0,    /* "dltensor": DLManagedTensor* */
  PROBE_KIND_VERSIONED = 1, /* "dltensor_versioned": DLManagedTensorVersioned* */
  PROBE_KIND_USED = 2,      /* "used_dltensor[_versioned]": consumed, never dereferenced */
  PROBE_KIND_UNKNOWN = 3,   /* any other name (or none): never dereferenced */
} probe_kind;

const char *probe_kind_str(probe_kind k);
/* Classifies a capsule name (NULL allowed). */
probe_kind probe_kind_of_name(const char *name);

/* A capsule's identity, read without dereferencing its pointer. */
typedef struct {
  const char *name; /* as stored in the capsule, may be NULL */
  void *pointer;    /* the capsule pointer (never NULL for a valid capsule) */
  PyCapsule_Destructor destructor;
  probe_kind kind;
} probe_capsule;

/* Fills c from obj. TypeError (returns -1) when obj is not a PyCapsule. */
int probe_capsule_read(PyObject *obj, probe_capsule *c);

/* Function pointer and data pointer -> Python int (unsigned). */
PyObject *probe_ptr_int(const void *p);
#define PROBE_FN_INT(fn) probe_ptr_int((const void *)(uintptr_t)(fn))

/* dict[key] = value, stealing value (which may be NULL: then -1, the error already set). */
int probe_put(PyObject *dict, const char *key, PyObject *value);

/* ---- inspect.c --------------------------------------------------------------------- */

/* Adds the DLTensor fields to dict: data, device, ndim, dtype, shape, strides,
 * byte_offset. shape/strides are None when NULL or when ndim is outside
 * [0, PROBE_MAX_NDIM] (then they are not read). Returns 0 or -1 with an exception. */
int probe_tensor_fields(PyObject *dict, const DLTensor *t);

/* Adds the managed-struct fields for a legacy (versioned=0) or versioned struct: version,
 * flags, manager_ctx, deleter, readable, then the tensor fields when readable. A versioned
 * struct is readable only when version.major == DLPACK_MAJOR_VERSION (VER-08). */
int probe_managed_fields(PyObject *dict, void *managed, int versioned);

/* The DLTensor inside a managed struct, or NULL (with ValueError set) when it must not be
 * read: a versioned struct with another major (VER-08). */
const DLTensor *probe_readable_tensor(void *managed, int versioned);

/* The tensor of a "dltensor"/"dltensor_versioned" capsule, or NULL with ValueError for a used
 * or unknown capsule (CAP-04) or an unreadable version (VER-08), TypeError for a
 * non-capsule. */
const DLTensor *probe_capsule_tensor(PyObject *obj);

PyObject *probe_name_str(const char *name);
PyObject *probe_inspect(PyObject *self, PyObject *obj);

/* dlc_extent_of with the ndim cap applied first. */
dlc_extent probe_extent(const DLTensor *t);
PyObject *probe_extent_dict(const dlc_extent *e);

/* ---- validate.c -------------------------------------------------------------------- */

PyObject *probe_check(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *probe_extent_py(PyObject *self, PyObject *obj);

/* ---- read.c ------------------------------------------------------------------------ */

/* 1 for the device types whose memory the host can read (DEV-01 numbering: CPU, CUDAHost,
 * ROCMHost, CUDAManaged). Anything else (CUDA, ROCm, ...) is a device address: dereferencing
 * it on the host would crash. */
int probe_host_readable(int32_t device_type);
/* The logical row-major element bytes of t (itemsize bytes each, honouring byte_offset
 * and strides; NULL strides: row-major, LAY-07). ValueError when the extent is not OK,
 * data is NULL for a non-empty tensor, or the device is not host-readable. */
PyObject *probe_read_tensor(const DLTensor *t);
PyObject *probe_read_elements(PyObject *self, PyObject *obj);
PyObject *probe_gather(PyObject *self, PyObject *args);

/* ---- tracker.c --------------------------------------------------------------------- */

extern PyTypeObject ProbeTracker_Type;
PyObject *probe_instrument(PyObject *self, PyObject *capsule);

/* ---- handle.c ---------------------------------------------------------------------- */

extern PyTypeObject ProbeHandle_Type;
/* A Handle owning managed (versioned or legacy). name: the capsule's name before it was
 * consumed (static string) or NULL when the tensor came without a capsule (exchange API). */
PyObject *probe_handle_new(void *managed, int versioned, const char *name,
                           PyCapsule_Destructor cap_destructor);
/* Takes the tensor out of an unreleased versioned Handle without calling its deleter
 * (ownership moves to a callee that steals it, XAPI-17). NULL + exception on error. */
DLManagedTensorVersioned *probe_handle_steal_versioned(PyObject *handle);
PyObject *probe_consume(PyObject *self, PyObject *capsule);

/* ---- exchange.c / xapi.c ----------------------------------------------------------- */

PyObject *probe_exchange_api(PyObject *self, PyObject *obj);
PyObject *probe_xapi_managed_from(PyObject *self, PyObject *args);
PyObject *probe_xapi_dltensor_from(PyObject *self, PyObject *args);
PyObject *probe_xapi_current_stream(PyObject *self, PyObject *args);
PyObject *probe_xapi_alloc(PyObject *self, PyObject *args);
PyObject *probe_xapi_to_py(PyObject *self, PyObject *args);
/* stress.c: N C threads export one tensor through the exchange API and __dlpack__. */
PyObject *probe_stress(PyObject *self, PyObject *args, PyObject *kwargs);

/* ---- bench.c ----------------------------------------------------------------------- */

/* bench(op, objs, arg=None, *, batches, target_ms, warmup_ms): batched timing loops. */
PyObject *probe_bench(PyObject *self, PyObject *args, PyObject *kwargs);

#endif /* DLCONFORM_PROBE_H */
