/* forge: dlconform._ref.Forge, capsules with any metadata (invalid included) and counted
 * deleters, for testing consumers.
 *
 * Invariants:
 *  - a forge_state holds the buffer, the managed structs of every capsule made, the
 *    deleter count and its log; it lives while the Forge object lives or any capsule with
 *    a non-NULL deleter has not had its deleter called yet, so a consumer that reads after
 *    dropping the Forge still reads valid memory; a capsule with a NULL deleter keeps it
 *    alive for the rest of the process (nothing could ever release it);
 *  - managed structs are freed with the state, not by their deleter, so a second deleter
 *    call (a consumer bug) is counted rather than a use-after-free while the state lives;
 *  - the deleter records the thread, PyGILState_Check() (only when Py_IsInitialized()) and
 *    Py_IsInitialized(); it takes no lock but the state's mutex and runs on any thread;
 *  - capsules use the standard destructor without producer faults (CAP-05..08);
 *  - revoke=(address, length): the first deleter call makes those pages of the caller's
 *    PROT_NONE, so a consumer reading after it faults (a twin of a producer that unmaps). */
#include "ref.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned long thread_id;
  int gil_held;
  int py_initialized;
} forge_log_entry;

struct forge_state;

typedef struct forge_rec {
  struct forge_rec *next;
  struct forge_state *st;
  atomic_int deleted;  /* first deleter call seen */
  int holds_ref;       /* this record holds a state reference until its first deletion */
  union {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
  } m;
  int64_t dims[];
} forge_rec;

typedef struct forge_state {
  atomic_long refs;
  atomic_long deleter_calls;
  pthread_mutex_t lock; /* guards log and recs */
  forge_log_entry *log;
  size_t log_len, log_cap;
  forge_rec *recs;
  char *buffer;         /* owned, REF_ALIGN-aligned, or NULL */
  uintptr_t revoke_at;  /* pages the first deleter call makes inaccessible (revoke=), or 0 */
  size_t revoke_len;
} forge_state;

static void state_decref(forge_state *st) {
  if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) != 1) return;
  forge_rec *r = st->recs;
  while (r) {
    forge_rec *n = r->next;
    free(r);
    r = n;
  }
  free(st->log);
  free(st->buffer);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

static void forge_count(forge_rec *r) {
  forge_state *st = r->st;
  forge_log_entry e;
  e.thread_id = (unsigned long)pthread_self();
  e.py_initialized = Py_IsInitialized();
  e.gil_held = e.py_initialized ? PyGILState_Check() : 0;
  pthread_mutex_lock(&st->lock);
  if (st->log_len == st->log_cap) {
    size_t cap = st->log_cap ? st->log_cap * 2 : 8;
    forge_log_entry *nl = realloc(st->log, cap * sizeof *nl);
    if (nl) {
      st->log = nl;
      st->log_cap = cap;
    }
  }
  if (st->log_len < st->log_cap) st->log[st->log_len++] = e;
  pthread_mutex_unlock(&st->lock);
  /* revoke=: the first call takes the pages away, as a producer that unmaps its memory in
   * its deleter does (the fuzz consumer target's read-only buffers, fuzz/layout.c) */
  if (atomic_fetch_add(&st->deleter_calls, 1) == 0 && st->revoke_len)
    mprotect((void *)st->revoke_at, st->revoke_len, PROT_NONE);
  if (atomic_exchange(&r->deleted, 1) == 0 && r->holds_ref) state_decref(st);
}

static void forge_deleter_v(DLManagedTensorVersioned *self) {
  forge_count((forge_rec *)((char *)self - offsetof(forge_rec, m)));
}

static void forge_deleter_l(DLManagedTensor *self) {
  forge_count((forge_rec *)((char *)self - offsetof(forge_rec, m)));
}

/* Capsule names must outlive every capsule (CAP-09): custom names are interned forever. */
static const char *intern_name(const char *name) {
  static struct interned {
    struct interned *next;
    char s[];
  } *head;
  for (struct interned *i = head; i; i = i->next)
    if (strcmp(i->s, name) == 0) return i->s;
  size_t n = strlen(name) + 1;
  struct interned *i = malloc(sizeof *i + n);
  if (!i) return NULL;
  memcpy(i->s, name, n);
  i->next = head;
  head = i;
  return i->s;
}

/* ---- the Forge object ------------------------------------------------------------- */

/* A forged DLTensor carries up to FORGE_MAX_NDIM shape and stride entries: every ndim a fuzz
 * record can hold (fuzz/record.h, int8), so its Python reproducer forges what the target did.
 * Reading the elements (expected_elements) stays within REF_MAX_NDIM, ref's own limit. */
#define FORGE_MAX_NDIM 128

typedef struct {
  PyObject_HEAD
  forge_state *st;
  DLDataType dtype;
  int32_t ndim;            /* written into the DLTensor */
  int32_t nshape;          /* entries in shape (and strides when given) */
  int64_t shape[FORGE_MAX_NDIM];
  int64_t strides[FORGE_MAX_NDIM];
  int has_strides;
  int shape_null;
  uint64_t byte_offset;
  void *data;              /* DLTensor.data */
  size_t buffer_size;      /* bytes of st->buffer exposed (alloc mode), else 0 */
  int versioned;
  DLPackVersion version;
  uint64_t flags;
  DLDevice device;
  int null_deleter;
  const char *capsule_name; /* static or interned */
  atomic_long capsules_made;
} Forge;


static int parse_pair(PyObject *o, const char *what, long long *a, long long *b) {
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) {
    PyErr_Format(PyExc_TypeError, "%s must be a 2-tuple of ints", what);
    return -1;
  }
  *a = PyLong_AsLongLong(PyTuple_GET_ITEM(o, 0));
  *b = PyLong_AsLongLong(PyTuple_GET_ITEM(o, 1));
  return PyErr_Occurred() ? -1 : 0;
}

static PyObject *Forge_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"dtype", "shape", "strides", "byte_offset", "data", "fill",
                           "buffer_size", "versioned", "version", "flags", "device",
                           "null_deleter", "ndim", "shape_null", "capsule_name", "revoke", NULL};
  PyObject *dtype_obj = NULL, *shape_obj = NULL, *strides_obj = Py_None, *data_obj = NULL,
           *fill_obj = Py_None, *bsize_obj = Py_None, *version_obj = NULL, *device_obj = NULL,
           *ndim_obj = Py_None, *name_obj = Py_None, *revoke_obj = Py_None;
  unsigned long long byte_offset = 0, flags = 0;
  int versioned = 1, null_deleter = 0, shape_null = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOKOOOpOKOpOpOO:Forge", kwlist,
                                   &dtype_obj, &shape_obj, &strides_obj, &byte_offset,
                                   &data_obj, &fill_obj, &bsize_obj, &versioned, &version_obj,
                                   &flags, &device_obj, &null_deleter, &ndim_obj, &shape_null,
                                   &name_obj, &revoke_obj))
    return NULL;
  Forge *f = (Forge *)type->tp_alloc(type, 0);
  if (!f) return NULL;
  atomic_init(&f->capsules_made, 0);
  f->st = calloc(1, sizeof *f->st);
  if (!f->st) {
    Py_DECREF(f);
    return PyErr_NoMemory();
  }
  atomic_init(&f->st->refs, 1);
  atomic_init(&f->st->deleter_calls, 0);
  pthread_mutex_init(&f->st->lock, NULL);
  /* revoke: (address, length) of whole pages of the caller's, made PROT_NONE at the first
   * deleter call; the caller keeps the mapping alive and unmaps it */
  if (revoke_obj != Py_None) {
    unsigned long long at = 0, len = 0;
    if (!PyArg_ParseTuple(revoke_obj, "KK;revoke must be (address, length)", &at, &len)) goto fail;
    f->st->revoke_at = (uintptr_t)at;
    f->st->revoke_len = (size_t)len;
  }

  /* dtype: raw (code, bits, lanes), any values, or a name */
  f->dtype = (DLDataType){kDLFloat, 32, 1};
  if (dtype_obj && PyUnicode_Check(dtype_obj)) {
    if (ref_parse_dtype(dtype_obj, &f->dtype) < 0) goto fail;
  } else if (dtype_obj) {
    if (!PyTuple_Check(dtype_obj) || PyTuple_GET_SIZE(dtype_obj) != 3) {
      PyErr_SetString(PyExc_TypeError, "dtype must be a name or (code, bits, lanes)");
      goto fail;
    }
    unsigned long c = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dtype_obj, 0));
    unsigned long b = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dtype_obj, 1));
    unsigned long l = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dtype_obj, 2));
    if (PyErr_Occurred()) goto fail;
    f->dtype = (DLDataType){(uint8_t)c, (uint8_t)b, (uint16_t)l};
  }
  if (shape_obj) {
    f->nshape = ref_parse_dims_upto(shape_obj, "shape", f->shape, FORGE_MAX_NDIM);
    if (f->nshape < 0) goto fail;
  } else {
    f->nshape = 1;
    f->shape[0] = 4;
  }
  if (strides_obj != Py_None) {
    int ns = ref_parse_dims_upto(strides_obj, "strides", f->strides, FORGE_MAX_NDIM);
    if (ns < 0) goto fail;
    if (ns != f->nshape) {
      PyErr_SetString(PyExc_ValueError, "strides must have one entry per shape entry");
      goto fail;
    }
    f->has_strides = 1;
  }
  f->ndim = f->nshape;
  if (ndim_obj != Py_None) {
    long n = PyLong_AsLong(ndim_obj);
    if (n == -1 && PyErr_Occurred()) goto fail;
    if (n < INT32_MIN || n > INT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "ndim must fit int32");
      goto fail;
    }
    f->ndim = (int32_t)n;
  }
  /* the arrays cover max(len(shape), ndim) entries: padding is extent 1, stride 0 */
  for (int32_t i = f->nshape; i < FORGE_MAX_NDIM; i++) {
    f->shape[i] = 1;
    f->strides[i] = 0;
  }
  f->shape_null = shape_null;
  f->byte_offset = byte_offset;
  f->versioned = versioned;
  f->version = (DLPackVersion){REF_SPEC_MAJOR, REF_SPEC_MINOR};
  if (version_obj) {
    long long a, b;
    if (parse_pair(version_obj, "version", &a, &b) < 0) goto fail;
    f->version = (DLPackVersion){(uint32_t)a, (uint32_t)b};
  }
  f->flags = flags;
  f->device = (DLDevice){kDLCPU, 0};
  if (device_obj) {
    long long a, b;
    if (parse_pair(device_obj, "device", &a, &b) < 0) goto fail;
    f->device = (DLDevice){(DLDeviceType)a, (int32_t)b};
  }
  f->null_deleter = null_deleter;
  f->capsule_name = versioned ? "dltensor_versioned" : "dltensor";
  if (name_obj != Py_None) {
    const char *n = PyUnicode_AsUTF8(name_obj);
    if (!n) goto fail;
    if (!(f->capsule_name = intern_name(n))) {
      PyErr_NoMemory();
      goto fail;
    }
  }

  /* data */
  if (!data_obj || (PyUnicode_Check(data_obj) &&
                    PyUnicode_CompareWithASCIIString(data_obj, "alloc") == 0)) {
    size_t size = 0;
    if (bsize_obj != Py_None) {
      size = PyLong_AsSize_t(bsize_obj);
      if (size == (size_t)-1 && PyErr_Occurred()) goto fail;
    } else {
      int32_t n = f->ndim >= 0 && f->ndim <= FORGE_MAX_NDIM ? f->ndim : f->nshape;
      DLTensor t = {NULL, f->device, n, f->dtype, f->shape, f->has_strides ? f->strides : NULL,
                    byte_offset};
      dlc_extent e = dlc_extent_of(&t);
      if (e.status == DLC_EXTENT_OK && !e.zero_size && e.hi > 0 &&
          byte_offset <= (uint64_t)INT64_MAX - (uint64_t)e.hi)
        size = (size_t)(byte_offset + (uint64_t)e.hi);
    }
    size_t rounded = size / REF_ALIGN * REF_ALIGN + REF_ALIGN;
    if (size > SIZE_MAX - 2 * REF_ALIGN || !(f->st->buffer = aligned_alloc(REF_ALIGN, rounded))) {
      PyErr_NoMemory();
      goto fail;
    }
    memset(f->st->buffer, 0, rounded);
    f->buffer_size = size;
    if (fill_obj == Py_None) {
      for (size_t i = 0; i < size; i++) f->st->buffer[i] = (char)(i & 0xff);
    } else {
      Py_buffer in;
      if (PyObject_GetBuffer(fill_obj, &in, PyBUF_SIMPLE) < 0) goto fail;
      if ((size_t)in.len > size) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "fill is longer than the buffer");
        goto fail;
      }
      memcpy(f->st->buffer, in.buf, (size_t)in.len);
      PyBuffer_Release(&in);
    }
    f->data = f->st->buffer;
  } else if (PyUnicode_Check(data_obj) &&
             PyUnicode_CompareWithASCIIString(data_obj, "null") == 0) {
    f->data = NULL;
  } else if (PyLong_Check(data_obj)) {
    f->data = PyLong_AsVoidPtr(data_obj);
    if (PyErr_Occurred()) goto fail;
  } else {
    PyErr_SetString(PyExc_ValueError, "data must be 'alloc', 'null' or an int address");
    goto fail;
  }
  return (PyObject *)f;
fail:
  Py_DECREF(f);
  return NULL;
}

static void Forge_dealloc(Forge *f) {
  if (f->st) state_decref(f->st);
  Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyObject *Forge_capsule(Forge *f, PyObject *unused) {
  (void)unused;
  size_t n = (size_t)(f->ndim > f->nshape ? (f->ndim > FORGE_MAX_NDIM ? FORGE_MAX_NDIM : f->ndim)
                                          : f->nshape);
  forge_rec *r = calloc(1, sizeof *r + sizeof(int64_t) * 2 * n);
  if (!r) return PyErr_NoMemory();
  r->st = f->st;
  atomic_init(&r->deleted, 0);
  memcpy(r->dims, f->shape, sizeof(int64_t) * n);
  memcpy(r->dims + n, f->strides, sizeof(int64_t) * n);
  DLTensor t = {f->data, f->device, f->ndim, f->dtype, f->shape_null ? NULL : r->dims,
                f->has_strides ? r->dims + n : NULL, f->byte_offset};
  void *managed;
  if (f->versioned) {
    r->m.v.version = f->version;
    r->m.v.manager_ctx = r;
    r->m.v.deleter = f->null_deleter ? NULL : forge_deleter_v;
    r->m.v.flags = f->flags;
    r->m.v.dl_tensor = t;
    managed = &r->m.v;
  } else {
    r->m.l.dl_tensor = t;
    r->m.l.manager_ctx = r;
    r->m.l.deleter = f->null_deleter ? NULL : forge_deleter_l;
    managed = &r->m.l;
  }
  /* a record with a deleter keeps the state alive until its first deletion; one without
   * keeps it forever: a NULL deleter means the memory is never released (OWN-01) */
  r->holds_ref = !f->null_deleter;
  atomic_fetch_add(&f->st->refs, 1);
  pthread_mutex_lock(&f->st->lock);
  r->next = f->st->recs;
  f->st->recs = r;
  pthread_mutex_unlock(&f->st->lock);
  atomic_fetch_add(&f->capsules_made, 1);
  return ref_capsule_new(managed, f->capsule_name, f->versioned, 0);
}

static int forge_host_readable(DLDeviceType type) {
  return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost || type == kDLCUDAManaged;
}

static PyObject *Forge_expected_elements(Forge *f, PyObject *unused) {
  (void)unused;
  if (f->ndim < 0 || f->ndim > REF_MAX_NDIM || (f->shape_null && f->ndim > 0)) {
    PyErr_SetString(PyExc_ValueError, "the forged layout has no elements to read");
    return NULL;
  }
  DLTensor t = {f->data, f->device, f->ndim, f->dtype, f->shape,
                f->has_strides ? f->strides : NULL, f->byte_offset};
  dlc_extent e = dlc_extent_of(&t);
  if (e.status != DLC_EXTENT_OK) {
    PyErr_Format(PyExc_ValueError, "invalid extent (status %d)", (int)e.status);
    return NULL;
  }
  if (e.zero_size) return PyBytes_FromStringAndSize(NULL, 0);
  if (!f->data) {
    PyErr_SetString(PyExc_ValueError, "NULL data for a non-empty tensor");
    return NULL;
  }
  /* data given on a device the host cannot read (cudaMalloc'd memory) is never read here: on a
   * GPU that would be a segfault of dlconform's, not a finding; the host types are read.c's */
  if (!f->st->buffer && !forge_host_readable(f->device.device_type)) {
    PyErr_Format(PyExc_ValueError, "the forged data (%p) was given on device type %d, which the host cannot read",
                 f->data, (int)f->device.device_type);
    return NULL;
  }
  if (f->st->buffer && (f->byte_offset > (uint64_t)INT64_MAX ||
                        (int64_t)f->byte_offset + e.lo < 0 ||
                        (uint64_t)((int64_t)f->byte_offset + e.hi) > f->buffer_size)) {
    PyErr_SetString(PyExc_ValueError, "the forged extent leaves the buffer");
    return NULL;
  }
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(e.numel * e.itemsize));
  if (!out) return NULL;
  ref_gather((const char *)f->data + f->byte_offset, f->ndim, f->shape, t.strides,
             (size_t)e.itemsize, PyBytes_AS_STRING(out));
  return out;
}

static PyObject *Forge_get_log(Forge *f, void *c) {
  (void)c;
  PyObject *list = PyList_New(0);
  if (!list) return NULL;
  pthread_mutex_lock(&f->st->lock);
  size_t n = f->st->log_len;
  forge_log_entry *copy = n ? malloc(n * sizeof *copy) : NULL;
  if (copy) memcpy(copy, f->st->log, n * sizeof *copy);
  pthread_mutex_unlock(&f->st->lock);
  if (n && !copy) {
    Py_DECREF(list);
    return PyErr_NoMemory();
  }
  for (size_t i = 0; i < n; i++) {
    PyObject *d = Py_BuildValue("{s:k,s:O,s:O}", "thread_id", copy[i].thread_id, "gil_held",
                                copy[i].gil_held ? Py_True : Py_False, "py_initialized",
                                copy[i].py_initialized ? Py_True : Py_False);
    if (!d || PyList_Append(list, d) < 0) {
      Py_XDECREF(d);
      Py_DECREF(list);
      free(copy);
      return NULL;
    }
    Py_DECREF(d);
  }
  free(copy);
  return list;
}

static PyObject *Forge_get_calls(Forge *f, void *c) {
  (void)c;
  return PyLong_FromLong(atomic_load(&f->st->deleter_calls));
}
static PyObject *Forge_get_made(Forge *f, void *c) {
  (void)c;
  return PyLong_FromLong(atomic_load(&f->capsules_made));
}
static PyObject *Forge_get_addr(Forge *f, void *c) {
  (void)c;
  return PyLong_FromVoidPtr(f->data);
}
static PyObject *Forge_get_size(Forge *f, void *c) {
  (void)c;
  return PyLong_FromSize_t(f->buffer_size);
}
static PyObject *Forge_get_buffer(Forge *f, void *c) {
  (void)c;
  if (!f->st->buffer) Py_RETURN_NONE;
  return PyMemoryView_FromObject((PyObject *)f); /* holds the Forge: the memory stays */
}

static int Forge_getbuffer(Forge *f, Py_buffer *view, int flags) {
  if (!f->st->buffer) {
    PyErr_SetString(PyExc_BufferError, "this forge has no buffer of its own");
    return -1;
  }
  return PyBuffer_FillInfo(view, (PyObject *)f, f->st->buffer, (Py_ssize_t)f->buffer_size, 0,
                           flags);
}

static PyBufferProcs Forge_as_buffer = {(getbufferproc)Forge_getbuffer, NULL};

static PyMethodDef Forge_methods[] = {
    {"capsule", (PyCFunction)Forge_capsule, METH_NOARGS,
     "A new capsule with a fresh managed struct."},
    {"expected_elements", (PyCFunction)Forge_expected_elements, METH_NOARGS,
     "The logical row-major element bytes the forged tensor describes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Forge_getset[] = {
    {"deleter_calls", (getter)Forge_get_calls, NULL, "deleter calls so far", NULL},
    {"capsules_made", (getter)Forge_get_made, NULL, "capsule() calls so far", NULL},
    {"log", (getter)Forge_get_log, NULL, "one dict per deleter call", NULL},
    {"buffer_address", (getter)Forge_get_addr, NULL, "DLTensor.data", NULL},
    {"buffer_size", (getter)Forge_get_size, NULL, "bytes of the own buffer", NULL},
    {"buffer", (getter)Forge_get_buffer, NULL, "writable memoryview, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RefForge_Type = {
    REF_TYPE_HEAD("Forge", Forge),
    .tp_dealloc = (destructor)Forge_dealloc,
    .tp_as_buffer = &Forge_as_buffer,
    .tp_doc = "Forge(*, dtype=(2, 32, 1), shape=(4,), strides=None, byte_offset=0, "
              "data='alloc', fill=None, buffer_size=None, versioned=True, version=(1, 3), "
              "flags=0, device=(1, 0), null_deleter=False, ndim=None, shape_null=False, "
              "capsule_name=None)",
    .tp_methods = Forge_methods,
    .tp_getset = Forge_getset,
    .tp_new = Forge_new,
};
