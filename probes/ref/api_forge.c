/* api_forge: ApiForge, forged DLPackExchangeAPI tables for the consumer-side XAPI checks.
 *
 * ApiForge(slot, *, major=1, minor=3, null=(), prev_api=None) owns a heap table whose
 * header says (major, minor) and whose functions are counting trampolines of slot 0 or 1
 * (two slots, so a check can tell which of two tables a consumer used: XAPI-04). A
 * trampoline counts the call, unwraps the object (a Tensor, or any object whose
 * `_dlconform_tensor` attribute is one) and calls the reference's own function; an object
 * with `_dlconform_handout()` has managed_tensor_from_py_object_no_sync hand out the
 * tensor of the versioned capsule that method returns (forged metadata included). `null`
 * names functions to leave NULL (XAPI-11); prev_api="ref" chains to the clean table's
 * header (XAPI-07).
 *
 * Invariants: the table lives as long as the forge, and every capsule() holds a reference
 * to the forge (capsule context), so a consumer holding the capsule holds the table.
 * A new forge zeroes its slot's counters: use one forge per slot at a time.
 * Counters are atomics: trampolines may run on any thread. */
#include "ref.h"

#include <string.h>

enum { FN_ALLOC, FN_FROM, FN_TO, FN_DLT, FN_STREAM, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {
    "managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
    "managed_tensor_to_py_object_no_sync", "dltensor_from_py_object_no_sync",
    "current_work_stream"};
static atomic_long counts[2][FN_COUNT];

/* The Tensor behind obj (new reference), or NULL with TypeError (XAPI-14). */
static PyObject *unwrap(void *py_object) {
  PyObject *obj = py_object;
  if (obj && RefTensor_Check(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  PyObject *t = obj ? PyObject_GetAttrString(obj, "_dlconform_tensor") : NULL;
  if (t && RefTensor_Check(t)) return t;
  Py_XDECREF(t);
  PyErr_Clear();
  PyErr_SetString(PyExc_TypeError, "ApiForge: not a forged-table object or a Tensor");
  return NULL;
}

/* A forged hand-out: obj._dlconform_handout() returns a "dltensor_versioned" capsule whose
 * tensor is handed out as it is, whatever its metadata; the capsule is renamed
 * used_dltensor_versioned, so the caller alone owns the tensor. 1 when obj offers one (rc
 * in *rc: 0, or -1 with an exception), 0 when it does not (no exception). */
static int handout(PyObject *obj, DLManagedTensorVersioned **o, int *rc) {
  PyObject *fn = obj ? PyObject_GetAttrString(obj, "_dlconform_handout") : NULL;
  if (!fn) {
    PyErr_Clear();
    return 0;
  }
  PyObject *cap = PyObject_CallNoArgs(fn);
  Py_DECREF(fn);
  *rc = -1;
  if (cap) {
    void *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m && PyCapsule_SetName(cap, "used_dltensor_versioned") == 0) {
      *o = m;
      *rc = 0;
    }
    Py_DECREF(cap);
  }
  return 1;
}

/* The functions of a slot: each counts its call and calls the reference's own, on the
 * Tensor behind the object for the two that take one (XAPI-14: TypeError otherwise);
 * managed_tensor_from_py_object_no_sync hands out a forged tensor where the object has one. */
static int from_slot(int slot, void *obj, DLManagedTensorVersioned **o) {
  atomic_fetch_add(&counts[slot][FN_FROM], 1);
  *o = NULL;
  int rc;
  if (handout(obj, o, &rc)) return rc;
  PyObject *t = unwrap(obj);
  rc = t ? ref_exchange_api_table()->managed_tensor_from_py_object_no_sync(t, o) : -1;
  Py_XDECREF(t);
  return rc;
}

static int dlt_slot(int slot, void *obj, DLTensor *o) {
  atomic_fetch_add(&counts[slot][FN_DLT], 1);
  PyObject *t = unwrap(obj); /* o borrows from it: obj holds it, and the caller holds obj */
  int rc = t ? ref_exchange_api_table()->dltensor_from_py_object_no_sync(t, o) : -1;
  Py_XDECREF(t);
  return rc;
}

#define SLOT_FUNCTIONS(S)                                                                    \
  static int alloc_##S(DLTensor *p, DLManagedTensorVersioned **o, void *c,                 \
                       void (*e)(void *, const char *, const char *)) {                    \
    atomic_fetch_add(&counts[S][FN_ALLOC], 1);                                             \
    return ref_exchange_api_table()->managed_tensor_allocator(p, o, c, e);                 \
  }                                                                                        \
  static int from_##S(void *obj, DLManagedTensorVersioned **o) { return from_slot(S, obj, o); } \
  static int to_##S(DLManagedTensorVersioned *m, void **o) {                               \
    atomic_fetch_add(&counts[S][FN_TO], 1);                                                \
    return ref_exchange_api_table()->managed_tensor_to_py_object_no_sync(m, o);            \
  }                                                                                        \
  static int dlt_##S(void *obj, DLTensor *o) { return dlt_slot(S, obj, o); }               \
  static int stream_##S(DLDeviceType d, int32_t id, void **o) {                            \
    atomic_fetch_add(&counts[S][FN_STREAM], 1);                                            \
    return ref_exchange_api_table()->current_work_stream(d, id, o);                        \
  }

SLOT_FUNCTIONS(0)
SLOT_FUNCTIONS(1)

static const DLPackExchangeAPI slot_tables[2] = {
    {{{1, 3}, NULL}, alloc_0, from_0, to_0, dlt_0, stream_0},
    {{{1, 3}, NULL}, alloc_1, from_1, to_1, dlt_1, stream_1},
};

typedef struct {
  PyObject_HEAD
  int slot;
  DLPackExchangeAPI table; /* inside the object: lives exactly as long as the forge */
} ApiForge;

static int forge_init(ApiForge *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"slot", "major", "minor", "null", "prev_api", NULL};
  int slot = 0;
  unsigned int major = DLPACK_MAJOR_VERSION, minor = DLPACK_MINOR_VERSION;
  PyObject *null = NULL, *prev = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i$IIOO:ApiForge", kwlist, &slot, &major,
                                   &minor, &null, &prev))
    return -1;
  if (slot < 0 || slot > 1) {
    PyErr_SetString(PyExc_ValueError, "slot must be 0 or 1");
    return -1;
  }
  self->slot = slot;
  for (int f = 0; f < FN_COUNT; f++) atomic_store(&counts[slot][f], 0); /* fresh counts */
  self->table = slot_tables[slot];
  self->table.header.version.major = major;
  self->table.header.version.minor = minor;
  if (prev != Py_None) {
    if (!PyUnicode_Check(prev) || PyUnicode_CompareWithASCIIString(prev, "ref") != 0) {
      PyErr_SetString(PyExc_ValueError, "prev_api must be None or \"ref\"");
      return -1;
    }
    self->table.header.prev_api = (DLPackExchangeAPIHeader *)&ref_exchange_api_table()->header;
  }
  if (null) {
    PyObject *seq = PySequence_Fast(null, "null must be a sequence of function names");
    if (!seq) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
      PyObject *n = PySequence_Fast_GET_ITEM(seq, i);
      int f = 0;
      while (f < FN_COUNT && !(PyUnicode_Check(n) &&
                               PyUnicode_CompareWithASCIIString(n, fn_names[f]) == 0))
        f++;
      switch (f) {
        case FN_ALLOC: self->table.managed_tensor_allocator = NULL; break;
        case FN_FROM: self->table.managed_tensor_from_py_object_no_sync = NULL; break;
        case FN_TO: self->table.managed_tensor_to_py_object_no_sync = NULL; break;
        case FN_DLT: self->table.dltensor_from_py_object_no_sync = NULL; break;
        case FN_STREAM: self->table.current_work_stream = NULL; break;
        default:
          Py_DECREF(seq);
          PyErr_Format(PyExc_ValueError, "unknown function name %R", n);
          return -1;
      }
    }
    Py_DECREF(seq);
  }
  return 0;
}

static void capsule_drop_forge(PyObject *cap) {
  PyObject *forge = PyCapsule_GetContext(cap);
  Py_XDECREF(forge);
}

static PyObject *forge_capsule(ApiForge *self, PyObject *unused) {
  (void)unused;
  PyObject *cap = PyCapsule_New(&self->table, "dlpack_exchange_api", capsule_drop_forge);
  if (!cap) return NULL;
  Py_INCREF(self);
  if (PyCapsule_SetContext(cap, self) < 0) {
    Py_DECREF(self);
    Py_DECREF(cap);
    return NULL;
  }
  return cap;
}

static PyObject *forge_calls(ApiForge *self, void *closure) {
  (void)closure;
  PyObject *d = PyDict_New();
  for (int f = 0; d && f < FN_COUNT; f++) {
    PyObject *v = PyLong_FromLong(atomic_load(&counts[self->slot][f]));
    if (!v || PyDict_SetItemString(d, fn_names[f], v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

static PyObject *forge_reset(ApiForge *self, PyObject *unused) {
  (void)unused;
  for (int f = 0; f < FN_COUNT; f++) atomic_store(&counts[self->slot][f], 0);
  Py_RETURN_NONE;
}

static PyObject *forge_pointer(ApiForge *self, void *closure) {
  (void)closure;
  return PyLong_FromVoidPtr(&self->table);
}

static PyMethodDef forge_methods[] = {
    {"capsule", (PyCFunction)forge_capsule, METH_NOARGS,
     "A new \"dlpack_exchange_api\" capsule of this table (holds the forge)."},
    {"reset", (PyCFunction)forge_reset, METH_NOARGS, "Zero this slot's call counters."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef forge_getset[] = {
    {"calls", (getter)forge_calls, NULL, "dict: calls per function of this slot", NULL},
    {"pointer", (getter)forge_pointer, NULL, "the table's address", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RefApiForge_Type = {
    REF_TYPE_HEAD("ApiForge", ApiForge),
    .tp_doc = "ApiForge(slot=0, *, major=1, minor=3, null=(), prev_api=None): a forged "
              "DLPackExchangeAPI whose counting functions delegate to the reference.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)forge_init,
    .tp_methods = forge_methods,
    .tp_getset = forge_getset,
};
