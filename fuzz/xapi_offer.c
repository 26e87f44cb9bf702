/* xapi_offer: exchange API tables, offer types and the XAPI-04 / XAPI-06 oracles (see
 * xapi_offer.h). Left out of coverage instrumentation (coverage.ignore): harness plumbing. */
#include "xapi_offer.h"

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "devmem.h"
#include "producer.h"

static dlc_xapi_log xlog = {-1, 0, 0, 0};

static const char kVersioned[] = "dltensor_versioned";
static const char kUsedVersioned[] = "used_dltensor_versioned";
static const char kApiName[] = "dlpack_exchange_api"; /* XAPI-02 */

/* Name equality without strcmp (libFuzzer intercepts it and records every mismatch). */
static int name_is(const char *name, const char *want) {
  if (name == NULL) return 0;
  while (*name != '\0' && *name == *want) ++name, ++want;
  return *name == *want;
}

/* ---- the functions behind every table ----------------------------------------------- */

/* The unconsumed versioned tensor of producer obj, or NULL with TypeError (not a producer:
 * XAPI-14 requires the type the API was found on) or BufferError (already handed out, a
 * used_* record, or not versioned) set. */
static DLManagedTensorVersioned *exported(void *obj, PyObject **capsule) {
  PyObject *cap = dlc_producer_capsule(obj);
  if (cap == NULL) {
    PyErr_SetString(PyExc_TypeError, "exchange API: not an object of the type it was found on");
    return NULL;
  }
  const char *name = PyCapsule_GetName(cap);
  if (!name_is(name, kVersioned)) {
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, "exchange API: the tensor was already exported");
    return NULL;
  }
  *capsule = cap;
  return PyCapsule_GetPointer(cap, name);
}

static int from_impl(void *obj, DLManagedTensorVersioned **out) {
  if (out == NULL) {
    PyErr_SetString(PyExc_ValueError, "managed_tensor_from_py_object_no_sync: out is NULL");
    return -1;
  }
  *out = NULL;
  PyObject *cap = NULL;
  DLManagedTensorVersioned *m = exported(obj, &cap);
  /* the rename makes the caller the one owner: the capsule's destructor skips it (CAP-06) */
  if (m == NULL || PyCapsule_SetName(cap, kUsedVersioned) != 0) return -1;
  xlog.handouts += 1;
  *out = m;
  return 0;
}

static int dltensor_impl(void *obj, DLTensor *out) {
  if (out == NULL) {
    PyErr_SetString(PyExc_ValueError, "dltensor_from_py_object_no_sync: out is NULL");
    return -1;
  }
  PyObject *cap = NULL;
  DLManagedTensorVersioned *m = exported(obj, &cap);
  if (m == NULL) return -1;
  *out = m->dl_tensor; /* the producer's own arrays, no allocation (XAPI-15) */
  xlog.views += 1;
  return 0;
}

/* Destructor of to_py's capsules: the tensor is deleted unless a consumer took it. */
static void owned_destructor(PyObject *capsule) {
  const char *name = PyCapsule_GetName(capsule);
  if (!name_is(name, kVersioned)) return;
  DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, name);
  if (m != NULL && m->deleter != NULL) m->deleter(m);
}

static PyTypeObject *offer_types[9]; /* by offer kind; [8]: MAJOR with DLC_OFFER_MAJOR0 */

static int to_py_impl(DLManagedTensorVersioned *tensor, void **out) {
  if (out != NULL) *out = NULL;
  if (tensor == NULL || out == NULL) {
    /* stolen (XAPI-17): a tensor given with a NULL out is still ours to delete */
    if (tensor != NULL && tensor->deleter != NULL) tensor->deleter(tensor);
    PyErr_SetString(PyExc_ValueError, "managed_tensor_to_py_object_no_sync: NULL argument");
    return -1;
  }
  PyObject *cap = PyCapsule_New(tensor, kVersioned, owned_destructor);
  if (cap == NULL) {
    if (tensor->deleter != NULL) tensor->deleter(tensor);
    return -1;
  }
  PyObject *p = dlc_producer_new_of(offer_types[DLC_OFFER_TYPE], cap,
                                    (int)tensor->dl_tensor.device.device_type,
                                    (int)tensor->dl_tensor.device.device_id);
  Py_DECREF(cap); /* without a producer the capsule dies here and deletes the tensor */
  if (p == NULL) return -1;
  *out = p;
  return 0;
}

static void alloc_deleter(DLManagedTensorVersioned *self) {
  free(self->dl_tensor.data);
  free(self);
}

#define ALLOC_CAP ((uint64_t)1 << 30)

/* XAPI-13: fails (-1) exactly when SetError is called, once. */
static int alloc_impl(DLTensor *proto, DLManagedTensorVersioned **out, void *error_ctx,
                      void (*SetError)(void *, const char *, const char *)) {
  const char *kind = "ValueError", *why = NULL;
  if (out != NULL) *out = NULL;
  uint64_t itemsize = proto ? dlc_dtype_itemsize(proto->dtype) : 0, bytes = itemsize;
  if (proto == NULL || out == NULL) why = "NULL prototype or out";
  else if (proto->device.device_type != kDLCPU) why = "only kDLCPU tensors are allocated";
  else if (proto->ndim < 0 || proto->ndim > DLC_REC_MAX_NDIM ||
           (proto->ndim > 0 && proto->shape == NULL))
    why = "invalid ndim or shape";
  else if (itemsize == 0) why = "dtype of item size 0";
  for (int i = 0; why == NULL && i < proto->ndim; ++i) {
    if (proto->shape[i] < 0) why = "negative extent";
    else if (__builtin_mul_overflow(bytes, (uint64_t)proto->shape[i], &bytes) || bytes > ALLOC_CAP)
      kind = "MemoryError", why = "tensor too large";
  }
  DLManagedTensorVersioned *m = NULL;
  void *data = NULL;
  if (why == NULL) {
    size_t n = (size_t)proto->ndim;
    m = calloc(1, sizeof *m + 2 * (n ? n : 1) * sizeof(int64_t));
    data = aligned_alloc(256, (size_t)((bytes + 255) / 256 * 256 + 256)); /* never size 0 */
    if (m == NULL || data == NULL) kind = "MemoryError", why = "out of memory";
  }
  if (why != NULL) {
    free(m);
    free(data);
    if (SetError != NULL) SetError(error_ctx, kind, why);
    return -1;
  }
  int64_t *shape = (int64_t *)(m + 1), *strides = shape + proto->ndim;
  int64_t step = 1;
  for (int i = proto->ndim - 1; i >= 0; --i) {
    shape[i] = proto->shape[i];
    strides[i] = step;
    step *= shape[i] > 1 ? shape[i] : 1; /* bounded by bytes <= ALLOC_CAP */
  }
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  m->manager_ctx = NULL;
  m->deleter = alloc_deleter;
  m->dl_tensor.data = data;
  m->dl_tensor.device = proto->device;
  m->dl_tensor.ndim = proto->ndim;
  m->dl_tensor.dtype = proto->dtype;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = strides;
  *out = m;
  return 0;
}

static int stream_impl(DLDeviceType device_type, int32_t device_id, void **out) {
  if (out == NULL) {
    PyErr_SetString(PyExc_ValueError, "current_work_stream: out is NULL");
    return -1;
  }
  /* CPU: NULL (XAPI-16). CUDA device 0 in the CUDA mode: the producer's own stream, where its
   * exports' bytes are pending (devmem.h; NULL, the legacy default stream, before any);
   * other devices: the default stream */
  *out = device_type == kDLCUDA && device_id == 0 ? dlc_devmem_work_stream() : NULL;
  return 0;
}

/* ---- roles: which tables a consumer may use ----------------------------------------- */

enum { ROLE_OK, ROLE_INSTANCE, ROLE_FOREIGN };

/* XAPI-04 / XAPI-06 when a consumer calls fn of a table of this role. */
static void judge(int role, const char *fn) {
  xlog.calls += 1;
  if (role == ROLE_INSTANCE)
    dlc_oracle_fail("XAPI-04", "from_dlpack called %s of the exchange table an instance "
                    "answers with, %s", fn,
                    (xlog.offer & DLC_OFFER_KIND) == DLC_OFFER_SHADOWED
                        ? "not the one its type offers (the lookup is on the type)"
                        : "though its type offers none (the lookup is on the type)");
  else if (role == ROLE_FOREIGN)
    dlc_oracle_fail("XAPI-06", "from_dlpack called %s of an exchange table whose header major "
                    "is %d, not %d", fn,
                    (xlog.offer & DLC_OFFER_KIND) == DLC_OFFER_MAJOR &&
                            (xlog.offer & DLC_OFFER_MAJOR0)
                        ? 0 : 2, DLPACK_MAJOR_VERSION);
}

#define ROLE_FUNCTIONS(R)                                                                    \
  static int alloc_##R(DLTensor *p, DLManagedTensorVersioned **o, void *c,                 \
                       void (*e)(void *, const char *, const char *)) {                    \
    judge(R, "managed_tensor_allocator");                                                  \
    return alloc_impl(p, o, c, e);                                                         \
  }                                                                                        \
  static int from_##R(void *obj, DLManagedTensorVersioned **o) {                           \
    judge(R, "managed_tensor_from_py_object_no_sync");                                     \
    return from_impl(obj, o);                                                              \
  }                                                                                        \
  static int to_##R(DLManagedTensorVersioned *m, void **o) {                               \
    judge(R, "managed_tensor_to_py_object_no_sync");                                       \
    return to_py_impl(m, o);                                                               \
  }                                                                                        \
  static int dlt_##R(void *obj, DLTensor *o) {                                             \
    judge(R, "dltensor_from_py_object_no_sync");                                           \
    return dltensor_impl(obj, o);                                                          \
  }                                                                                        \
  static int stream_##R(DLDeviceType d, int32_t id, void **o) {                            \
    judge(R, "current_work_stream");                                                       \
    return stream_impl(d, id, o);                                                          \
  }

ROLE_FUNCTIONS(ROLE_OK)
ROLE_FUNCTIONS(ROLE_INSTANCE)
ROLE_FUNCTIONS(ROLE_FOREIGN)

#define FNS(R) alloc_##R, from_##R, to_##R, dlt_##R, stream_##R
#define V13 {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}

/* Static for the process (XAPI-05); never written after initialisation. */
static DLPackExchangeAPI t_ok = {{V13, NULL}, FNS(ROLE_OK)};
static DLPackExchangeAPI t_minor = {{{DLPACK_MAJOR_VERSION, 99}, NULL}, FNS(ROLE_OK)};
static DLPackExchangeAPI t_null_dlt = {{V13, NULL}, alloc_ROLE_OK, from_ROLE_OK, to_ROLE_OK,
                                       NULL, stream_ROLE_OK}; /* XAPI-11 */
static DLPackExchangeAPI t_instance = {{V13, NULL}, FNS(ROLE_INSTANCE)};
static DLPackExchangeAPI t_major2 = {{{2, 0}, NULL}, FNS(ROLE_FOREIGN)};
static DLPackExchangeAPI t_major0 = {{{0, 8}, NULL}, FNS(ROLE_FOREIGN)};
static DLPackExchangeAPI t_chained = {{{2, 0}, &t_ok.header}, FNS(ROLE_FOREIGN)}; /* XAPI-07 */

/* ---- offer types ---------------------------------------------------------------------- */

static PyObject *k_attr;       /* interned "__dlpack_c_exchange_api__" */
static PyObject *instance_cap; /* the capsule of t_instance */

/* Instances of INSTANCE and SHADOWED types answer the attribute with t_instance; the type
 * itself does not (INSTANCE) or gives its own (SHADOWED): XAPI-04. */
static PyObject *instance_getattro(PyObject *self, PyObject *name) {
  if (name == k_attr || (PyUnicode_Check(name) && PyUnicode_Compare(name, k_attr) == 0)) {
    Py_INCREF(instance_cap);
    return instance_cap;
  }
  return PyObject_GenericGetAttr(self, name);
}

int dlc_xapi_offer_init(void) {
  static const struct {
    const char *name;
    DLPackExchangeAPI *type_table; /* NULL: no type attribute */
    int instance;                  /* instances answer with t_instance */
  } k[9] = {
      [DLC_OFFER_TYPE] = {"dlconform_fuzz.ProducerXapiType", &t_ok, 0},
      [DLC_OFFER_INSTANCE] = {"dlconform_fuzz.ProducerXapiInstance", NULL, 1},
      [DLC_OFFER_MAJOR] = {"dlconform_fuzz.ProducerXapiMajor2", &t_major2, 0},
      [DLC_OFFER_NULL_DLTENSOR] = {"dlconform_fuzz.ProducerXapiNullDLTensor", &t_null_dlt, 0},
      [DLC_OFFER_CHAINED] = {"dlconform_fuzz.ProducerXapiChained", &t_chained, 0},
      [DLC_OFFER_SHADOWED] = {"dlconform_fuzz.ProducerXapiShadowed", &t_ok, 1},
      [DLC_OFFER_MINOR] = {"dlconform_fuzz.ProducerXapiMinor", &t_minor, 0},
      [8] = {"dlconform_fuzz.ProducerXapiMajor0", &t_major0, 0},
  };
  if (offer_types[DLC_OFFER_TYPE] != NULL) return 0;
  k_attr = PyUnicode_InternFromString("__dlpack_c_exchange_api__"); /* XAPI-01 */
  instance_cap = PyCapsule_New(&t_instance, kApiName, NULL);
  if (k_attr == NULL || instance_cap == NULL) return -1;
  for (int i = 1; i < 9; ++i) {
    PyTypeObject *t = dlc_producer_type_new(k[i].name, k[i].instance ? instance_getattro : NULL);
    if (t == NULL) return -1;
    if (k[i].type_table != NULL) {
      /* the struct is static: the capsule needs no destructor (XAPI-05) */
      PyObject *cap = PyCapsule_New(k[i].type_table, kApiName, NULL);
      int rc = cap ? PyObject_SetAttr((PyObject *)t, k_attr, cap) : -1;
      Py_XDECREF(cap);
      if (rc != 0) return -1;
    }
    offer_types[i] = t;
  }
  return 0;
}

PyTypeObject *dlc_xapi_offer_type(const dlc_record *r) {
  int kind = dlc_rec_offer(r);
  if (kind == DLC_OFFER_MAJOR && (r->offer & DLC_OFFER_MAJOR0)) return offer_types[8];
  return kind == DLC_OFFER_NONE ? NULL : offer_types[kind];
}

void dlc_xapi_begin(const dlc_record *r) {
  xlog.offer = r->offer;
  xlog.calls = xlog.handouts = xlog.views = 0;
}

void dlc_xapi_end(void) { xlog.offer = -1; }

const dlc_xapi_log *dlc_xapi_log_now(void) { return &xlog; }
