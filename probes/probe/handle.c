/* handle.c: `consume(capsule)` and the `Handle` type: a consumer's owning reference.
 *
 * Invariants: a Handle calls the managed struct's deleter at most once, on release() or on
 * dealloc, and skips a NULL deleter (OWN-01, OWN-03). After release (or after the tensor
 * was stolen by a callee, XAPI-17) the struct is never touched again. The deleter is read
 * at release time from the struct (so an instrument() trampoline installed after consume
 * is honoured) and, for a versioned struct, whatever its major (VER-08, VER-10).
 */
#include "probe.h"

typedef struct {
  PyObject_HEAD
  void *managed;
  int versioned;
  const char *name; /* static: the capsule's name before consume, or NULL */
  PyCapsule_Destructor destructor;
  int released; /* the struct is no longer ours: deleter called, skipped or stolen */
  int stolen;   /* ownership went to a callee without a deleter call */
  int called;   /* release() called a non-NULL deleter */
} ProbeHandle;

/* Releases once. Returns 1 when a deleter was called. */
static int handle_release_once(ProbeHandle *h) {
  if (h->released) return 0;
  h->released = 1;
  if (h->versioned) {
    DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)h->managed;
    void (*del)(struct DLManagedTensorVersioned *) = m->deleter;
    if (del == NULL) return 0; /* OWN-01 */
    del(m);
  } else {
    DLManagedTensor *m = (DLManagedTensor *)h->managed;
    void (*del)(struct DLManagedTensor *) = m->deleter;
    if (del == NULL) return 0; /* OWN-01 */
    del(m);
  }
  h->called = 1;
  return 1;
}

static void handle_dealloc(PyObject *o) {
  ProbeHandle *h = (ProbeHandle *)o;
  /* A deleter may run Python code (taking the GIL, OWN-04): keep any pending exception. */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  handle_release_once(h);
  PyErr_Restore(type, value, tb);
  Py_TYPE(o)->tp_free(o);
}

static PyObject *handle_release(PyObject *o, PyObject *unused) {
  (void)unused;
  return PyBool_FromLong(handle_release_once((ProbeHandle *)o));
}

static int handle_live(ProbeHandle *h) {
  if (h->released) {
    PyErr_SetString(PyExc_ValueError,
                    h->stolen ? "the tensor was stolen (XAPI-17)" : "the handle was released");
    return 0;
  }
  return 1;
}

static PyObject *handle_inspect(PyObject *o, PyObject *unused) {
  (void)unused;
  ProbeHandle *h = (ProbeHandle *)o;
  if (!handle_live(h)) return NULL;
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  if (probe_put(d, "name", probe_name_str(h->name)) < 0 ||
      probe_put(d, "pointer", probe_ptr_int(h->managed)) < 0 ||
      probe_put(d, "kind", PyUnicode_FromString(h->versioned ? "versioned" : "legacy")) < 0 ||
      probe_put(d, "destructor", PROBE_FN_INT(h->destructor)) < 0 ||
      probe_managed_fields(d, h->managed, h->versioned) < 0) {
    Py_DECREF(d);
    return NULL;
  }
  return d;
}

static PyObject *handle_read_elements(PyObject *o, PyObject *unused) {
  (void)unused;
  ProbeHandle *h = (ProbeHandle *)o;
  if (!handle_live(h)) return NULL;
  const DLTensor *t = probe_readable_tensor(h->managed, h->versioned);
  if (t == NULL) return NULL;
  return probe_read_tensor(t);
}

static PyObject *handle_extent(PyObject *o, PyObject *unused) {
  (void)unused;
  ProbeHandle *h = (ProbeHandle *)o;
  if (!handle_live(h)) return NULL;
  const DLTensor *t = probe_readable_tensor(h->managed, h->versioned);
  if (t == NULL) return NULL;
  dlc_extent e = probe_extent(t);
  return probe_extent_dict(&e);
}

static PyObject *handle_enter(PyObject *o, PyObject *unused) {
  (void)unused;
  Py_INCREF(o);
  return o;
}

static PyObject *handle_exit(PyObject *o, PyObject *args) {
  (void)args;
  handle_release_once((ProbeHandle *)o);
  Py_RETURN_FALSE;
}

static PyObject *handle_get_released(PyObject *o, void *c) {
  (void)c;
  return PyBool_FromLong(((ProbeHandle *)o)->released);
}
static PyObject *handle_get_stolen(PyObject *o, void *c) {
  (void)c;
  return PyBool_FromLong(((ProbeHandle *)o)->stolen);
}
static PyObject *handle_get_called(PyObject *o, void *c) {
  (void)c;
  return PyBool_FromLong(((ProbeHandle *)o)->called);
}
static PyObject *handle_get_pointer(PyObject *o, void *c) {
  (void)c;
  return probe_ptr_int(((ProbeHandle *)o)->managed);
}
static PyObject *handle_get_kind(PyObject *o, void *c) {
  (void)c;
  return PyUnicode_FromString(((ProbeHandle *)o)->versioned ? "versioned" : "legacy");
}

static PyObject *handle_repr(PyObject *o) {
  ProbeHandle *h = (ProbeHandle *)o;
  return PyUnicode_FromFormat("<dlconform._probe.Handle %s %p%s>",
                              h->versioned ? "versioned" : "legacy", h->managed,
                              h->stolen ? " stolen" : h->released ? " released" : "");
}

static PyMethodDef handle_methods[] = {
    {"release", handle_release, METH_NOARGS,
     "Call the deleter once if non-NULL (OWN-01, OWN-03); True if it was called."},
    {"inspect", handle_inspect, METH_NOARGS, "The struct's fields, as _probe.inspect."},
    {"read_elements", handle_read_elements, METH_NOARGS,
     "Logical row-major element bytes, as _probe.read_elements."},
    {"extent", handle_extent, METH_NOARGS, "The extent dict, as _probe.extent."},
    {"__enter__", handle_enter, METH_NOARGS, NULL},
    {"__exit__", handle_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef handle_getset[] = {
    {"released", handle_get_released, NULL, "the struct is no longer owned by this handle",
     NULL},
    {"stolen", handle_get_stolen, NULL, "ownership was passed to a callee (XAPI-17)", NULL},
    {"deleter_called", handle_get_called, NULL, "release() called a non-NULL deleter", NULL},
    {"pointer", handle_get_pointer, NULL, "the managed struct's address", NULL},
    {"kind", handle_get_kind, NULL, "'legacy' or 'versioned'", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ProbeHandle_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dlconform._probe.Handle",
    .tp_basicsize = sizeof(ProbeHandle),
    .tp_dealloc = handle_dealloc,
    .tp_repr = handle_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Owns a consumed DLPack tensor; calls its deleter exactly once.",
    .tp_methods = handle_methods,
    .tp_getset = handle_getset,
};

PyObject *probe_handle_new(void *managed, int versioned, const char *name,
                           PyCapsule_Destructor cap_destructor) {
  ProbeHandle *h = PyObject_New(ProbeHandle, &ProbeHandle_Type);
  if (h == NULL) return NULL;
  h->managed = managed;
  h->versioned = versioned;
  h->name = name;
  h->destructor = cap_destructor;
  h->released = 0;
  h->stolen = 0;
  h->called = 0;
  return (PyObject *)h;
}

DLManagedTensorVersioned *probe_handle_steal_versioned(PyObject *o) {
  if (!PyObject_TypeCheck(o, &ProbeHandle_Type)) {
    PyErr_Format(PyExc_TypeError, "expected a Handle, got %.200s", Py_TYPE(o)->tp_name);
    return NULL;
  }
  ProbeHandle *h = (ProbeHandle *)o;
  if (!handle_live(h)) return NULL;
  if (!h->versioned) {
    PyErr_SetString(PyExc_ValueError,
                    "the exchange API takes DLManagedTensorVersioned only; this is legacy");
    return NULL;
  }
  h->released = 1;
  h->stolen = 1;
  return (DLManagedTensorVersioned *)h->managed;
}

PyObject *probe_consume(PyObject *self, PyObject *obj) {
  (void)self;
  probe_capsule c;
  if (probe_capsule_read(obj, &c) < 0) return NULL;
  /* CAP-04: a used_* capsule is owned by another consumer; an unknown name is not ours. */
  if (c.kind != PROBE_KIND_LEGACY && c.kind != PROBE_KIND_VERSIONED) {
    PyErr_Format(PyExc_ValueError, "cannot consume a capsule named %s (%s, CAP-04)",
                 c.name ? c.name : "NULL", probe_kind_str(c.kind));
    return NULL;
  }
  int versioned = c.kind == PROBE_KIND_VERSIONED;
  PyObject *h = probe_handle_new(c.pointer, versioned,
                                 versioned ? PROBE_NAME_VERSIONED : PROBE_NAME_LEGACY,
                                 c.destructor);
  if (h == NULL) return NULL;
  /* CAP-03: take ownership by renaming; the producer's destructor then skips the deleter
   * (CAP-06). The new name is static storage (CAP-09). */
  if (PyCapsule_SetName(obj, versioned ? PROBE_NAME_USED_VERSIONED : PROBE_NAME_USED_LEGACY) <
      0) {
    ((ProbeHandle *)h)->released = 1; /* not ours after all */
    Py_DECREF(h);
    return NULL;
  }
  return h;
}
