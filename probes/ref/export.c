/* export: Tensor.__dlpack__, the managed structs it hands out, their deleters and the
 * standard capsule destructor.
 *
 * Invariants:
 *  - every managed struct holds one reference to the tensor's ref_buf, so data stays valid
 *    until its deleter runs, whatever happens to the Tensor (OWN-05);
 *  - deleters free the struct (OWN-02) and may run on any thread, without the GIL, after
 *    finalisation (OWN-04). Only the GIL-counted deleter touches Python: it takes the GIL
 *    when its thread lacks it, and leaks once the interpreter is finalising;
 *  - strides are non-NULL for ndim > 0 (LAY-06), data is NULL for zero-size (LAY-04),
 *    versioned exports carry version (1, 3) (VER-07) and only defined flags (FLG-01). */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

/* ---- managed structs -------------------------------------------------------------- */

typedef struct {
  DLManagedTensorVersioned m; /* first: the struct's address is the hand-out */
  atomic_long refs;           /* hand-outs in flight (+1 held by a caching tensor) */
  long gil_refs;              /* the same, GIL discipline: touched only with the GIL held */
  ref_buf *buf;
  int cached;                 /* 1 once published as a tensor's cached export */
  int64_t dims[];             /* shape then strides, ndim each */
} ref_managed_v;

typedef struct {
  DLManagedTensor m;
  ref_buf *buf;
  int64_t dims[];
} ref_managed_l;

/* Copies shape and strides of src into dims and points dst at them. */
static void copy_layout(DLTensor *dst, const DLTensor *src, int64_t *dims) {
  *dst = *src;
  int32_t n = src->ndim > 0 ? src->ndim : 0;
  dst->shape = src->shape ? dims : NULL;
  dst->strides = src->strides ? dims + n : NULL;
  if (src->shape && n) memcpy(dims, src->shape, sizeof(int64_t) * (size_t)n);
  if (src->strides && n) memcpy(dims + n, src->strides, sizeof(int64_t) * (size_t)n);
}

static void release_n(ref_managed_v *v, long n) {
  if (atomic_fetch_sub_explicit(&v->refs, n, memory_order_acq_rel) != n) return;
  ref_buf_decref(v->buf);
  free(v);
}

static void poison_if_unretained(ref_managed_v *v) {
  if (v->cached && ref_fault_is(FAULT_CACHE_HANDOUT_UNRETAINED)) /* fault (OWN-05): as if */
    memset(v->dims, 0xA5, sizeof(int64_t) * 2 * (size_t)v->m.dl_tensor.ndim); /* freed */
}

/* Any thread, no GIL, no Python (OWN-04): one hand-out's reference goes. */
static void versioned_deleter(DLManagedTensorVersioned *self) {
  ref_managed_v *v = (ref_managed_v *)self;
  poison_if_unretained(v);
  release_n(v, 1);
}

/* GIL discipline. gil_refs is a plain long: every read and write of it happens with the
 * GIL held (hand-outs run under it, tensor dealloc too, and the deleter takes it), so the
 * GIL orders them and no locked instruction is needed. Not for Py_GIL_DISABLED builds. */
static void drop_gil_count(ref_managed_v *v) {
  if (--v->gil_refs) return;
  ref_buf_decref(v->buf);
  free(v);
}

#if PY_VERSION_HEX >= 0x030D0000
#define ref_interpreter_finalizing() Py_IsFinalizing()
#else
#define ref_interpreter_finalizing() _Py_IsFinalizing()
#endif

static void versioned_deleter_gil(DLManagedTensorVersioned *self) {
  ref_managed_v *v = (ref_managed_v *)self;
  poison_if_unretained(v);
  if (ref_gil_held() || ref_fault_is(FAULT_CACHE_DELETER_NO_GIL)) {
    drop_gil_count(v);
    return;
  }
  /* OWN-04: no Python once the interpreter is going away: the struct leaks instead */
  if (!Py_IsInitialized() || ref_interpreter_finalizing()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  drop_gil_count(v);
  PyGILState_Release(gil);
}

void ref_versioned_use_gil_count(DLManagedTensorVersioned *m) {
  ref_managed_v *v = (ref_managed_v *)m;
  v->gil_refs = atomic_load_explicit(&v->refs, memory_order_relaxed); /* unpublished */
  v->m.deleter = versioned_deleter_gil;
}

void ref_versioned_retain_gil(DLManagedTensorVersioned *m) { ((ref_managed_v *)m)->gil_refs++; }

void ref_versioned_release_gil(DLManagedTensorVersioned *m) { drop_gil_count((ref_managed_v *)m); }

void ref_versioned_mark_cached(DLManagedTensorVersioned *m) { ((ref_managed_v *)m)->cached = 1; }

void ref_versioned_retain(DLManagedTensorVersioned *m) {
  atomic_fetch_add_explicit(&((ref_managed_v *)m)->refs, 1, memory_order_relaxed);
}

void ref_versioned_release(DLManagedTensorVersioned *m) { release_n((ref_managed_v *)m, 1); }

DLManagedTensorVersioned *ref_make_versioned(ref_buf *buf, const DLTensor *t, uint64_t flags) {
  size_t n = t->ndim > 0 ? (size_t)t->ndim : 0;
  ref_managed_v *v = malloc(sizeof *v + sizeof(int64_t) * 2 * n);
  if (!v) return NULL;
  v->m.version.major = REF_SPEC_MAJOR; /* VER-07 */
  v->m.version.minor = REF_SPEC_MINOR;
  if (ref_fault_is(FAULT_VERSION_WRONG)) v->m.version.major = v->m.version.minor = 0;
  v->m.manager_ctx = v;
  v->m.deleter = versioned_deleter;
  v->m.flags = flags;
  copy_layout(&v->m.dl_tensor, t, v->dims);
  atomic_init(&v->refs, 1);
  v->gil_refs = 0;
  v->cached = 0;
  v->buf = buf;
  ref_buf_incref(buf);
  return &v->m;
}

static void legacy_deleter(DLManagedTensor *self) {
  ref_managed_l *l = (ref_managed_l *)self;
  ref_buf_decref(l->buf);
  free(l);
}

DLManagedTensor *ref_make_legacy(ref_buf *buf, const DLTensor *t) {
  size_t n = t->ndim > 0 ? (size_t)t->ndim : 0;
  ref_managed_l *l = malloc(sizeof *l + sizeof(int64_t) * 2 * n);
  if (!l) return NULL;
  copy_layout(&l->m.dl_tensor, t, l->dims);
  l->m.manager_ctx = l;
  l->m.deleter = legacy_deleter;
  l->buf = buf;
  ref_buf_incref(buf);
  return &l->m;
}

uint64_t ref_export_flags(const RefTensor *t) {
  uint64_t f = 0;
  if (t->readonly && !ref_fault_is(FAULT_READONLY_UNFLAGGED)) f |= DLPACK_FLAG_BITMASK_READ_ONLY;
  /* sub-byte dtypes are stored one element per dlc_dtype_itemsize bytes (FLG-06) */
  if (t->subbyte) f |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  if (ref_fault_is(FAULT_UNDEFINED_FLAG)) f |= (uint64_t)1 << 7;
  return f;
}

ref_buf *ref_copy_compact(const RefTensor *t) {
  size_t n = t->zero_size ? 0 : (size_t)t->numel * t->itemsize;
  ref_buf *b = ref_buf_alloc(n);
  if (!b) {
    PyErr_NoMemory();
    return NULL;
  }
  if (n)
    ref_gather(t->data + t->byte_offset, t->ndim, t->shape, t->strides, t->itemsize, b->mem);
  return b;
}

/* The metadata faults of the producer, applied to the DLTensor about to be exported.
 * scratch holds REF_MAX_NDIM strides. */
static void apply_export_faults(DLTensor *dl, int versioned, int64_t *scratch) {
  static _Alignas(REF_ALIGN) char nonnull[REF_ALIGN];
  if (ref_fault_is(FAULT_BYTE_STRIDES) && dl->strides) {
    for (int32_t i = 0; i < dl->ndim; i++)
      scratch[i] = dl->strides[i] * (int64_t)dlc_dtype_itemsize(dl->dtype);
    dl->strides = scratch;
  }
  if (ref_fault_is(FAULT_NULL_STRIDES) && versioned && dl->ndim > 0) dl->strides = NULL;
  if (ref_fault_is(FAULT_ZERO_SIZE_DATA) && dl->data == NULL) dl->data = nonnull;
  if (ref_fault_is(FAULT_BOOL_BITS) && dl->dtype.code == kDLBool) dl->dtype.bits = 1;
  if (ref_fault_is(FAULT_DEVICE_MISMATCH)) dl->device.device_type = kDLCUDAHost;
  if (ref_fault_is(FAULT_CPU_DEVICE_ID)) dl->device.device_id = 1;
}

/* 1 when the active fault changes what a versioned no-copy export carries. */
static int export_fault_active(void) {
  return ref_fault_table[ref_fault_current()].changes_export;
}

DLManagedTensorVersioned *ref_export_versioned_nocopy(RefTensor *t) {
#ifdef Py_GIL_DISABLED
  if (!export_fault_active()) return ref_cache_handout(t);
#else
  if (!export_fault_active()) return ref_cache_handout_gil(t);
#endif
  DLTensor dl;
  int64_t scratch[REF_MAX_NDIM];
  ref_tensor_fill(t, &dl);
  apply_export_faults(&dl, 1, scratch);
  return ref_make_versioned(t->buf, &dl, ref_export_flags(t));
}

/* ---- capsules --------------------------------------------------------------------- */

/* Capsule contexts: which struct a capsule holds, whatever its name. */
static const char kind_legacy_marker = 'L';
static const char kind_versioned_marker = 'V';

/* The standard destructor (CAP-05..08): an unconsumed capsule's deleter runs; a capsule
 * renamed used_* is the consumer's and is left alone; a NULL deleter is skipped; a failed
 * pointer fetch is reported as unraisable and never propagates. apply_faults selects the
 * producer's destructor faults (Tensor capsules only, never Forge ones). */
static void capsule_release(PyObject *cap, int apply_faults) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  const char *name = PyCapsule_GetName(cap);
  if (!name && PyErr_Occurred()) {
    PyErr_WriteUnraisable(cap);
    goto done;
  }
  int used = name && strncmp(name, "used_", 5) == 0;
  if (used && !(apply_faults && ref_fault_is(FAULT_DESTRUCTOR_IGNORES_USED))) goto done;
  if (!used && apply_faults && ref_fault_is(FAULT_DESTRUCTOR_LEAKS)) goto done;
  void *ctx = PyCapsule_GetContext(cap);
  void *p = PyCapsule_GetPointer(cap, name);
  if (!p) {
    PyErr_WriteUnraisable(cap); /* CAP-08 */
    goto done;
  }
  if (ctx == &kind_versioned_marker) {
    DLManagedTensorVersioned *m = p;
    if (m->deleter) m->deleter(m); /* CAP-07 */
  } else if (ctx == &kind_legacy_marker) {
    DLManagedTensor *m = p;
    if (m->deleter) m->deleter(m);
  }
done:
  PyErr_Restore(et, ev, tb);
}

static void tensor_capsule_destructor(PyObject *cap) { capsule_release(cap, 1); }
static void plain_capsule_destructor(PyObject *cap) { capsule_release(cap, 0); }

PyObject *ref_capsule_new(void *managed, const char *name, int kind_versioned,
                          int apply_faults) {
  PyObject *cap = PyCapsule_New(managed, name,
                                apply_faults ? tensor_capsule_destructor
                                             : plain_capsule_destructor);
  if (cap && PyCapsule_SetContext(cap, (void *)(kind_versioned ? &kind_versioned_marker
                                                               : &kind_legacy_marker)) == 0)
    return cap;
  Py_XDECREF(cap); /* context not yet set: the destructor does nothing */
  if (kind_versioned) {
    DLManagedTensorVersioned *m = managed;
    if (m->deleter) m->deleter(m);
  } else {
    DLManagedTensor *m = managed;
    if (m->deleter) m->deleter(m);
  }
  return NULL;
}

/* ---- __dlpack__ ------------------------------------------------------------------- */

/* max_version: -1 error (TypeError), else 1 when a versioned capsule is returned. */
static int wants_versioned(PyObject *max_version) {
  if (max_version == Py_None) return ref_fault_is(FAULT_IGNORE_MAX_VERSION); /* VER-02 */
  if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) != 2 ||
      !PyLong_Check(PyTuple_GET_ITEM(max_version, 0)) ||
      !PyLong_Check(PyTuple_GET_ITEM(max_version, 1))) {
    PyErr_SetString(PyExc_TypeError, "max_version must be None or a (major, minor) tuple");
    return -1;
  }
  int overflow;
  long long major = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(max_version, 0), &overflow);
  if (major == -1 && PyErr_Occurred()) return -1;
  if (overflow > 0 || major >= (long long)REF_SPEC_MAJOR) return 1; /* VER-03 */
  return ref_fault_is(FAULT_OLD_MAJOR_VERSIONED); /* VER-04: legacy for major 0 */
}

static int check_stream(PyObject *stream) {
  if (stream == Py_None) return 0;
  if (PyLong_Check(stream) && !PyBool_Check(stream)) {
    if (ref_fault_is(FAULT_STREAM_ACCEPTED)) return 0;
    PyErr_SetString(ref_fault_is(FAULT_STREAM_SYSTEMERROR) ? PyExc_SystemError : PyExc_BufferError,
                    "stream must be None for a CPU tensor"); /* STR-10 */
    return -1;
  }
  PyErr_Format(PyExc_TypeError, "stream must be None or an int, not %.100s", /* STR-02 */
               Py_TYPE(stream)->tp_name);
  return -1;
}

static int check_dl_device(PyObject *dev) {
  if (dev == Py_None) return 0;
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 &&
      PyLong_Check(PyTuple_GET_ITEM(dev, 0)) && PyLong_Check(PyTuple_GET_ITEM(dev, 1))) {
    long type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    long id = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
    if (PyErr_Occurred()) PyErr_Clear();
    else if (type == kDLCPU && id == 0 && !ref_fault_is(FAULT_DL_DEVICE_CPU_REFUSED)) return 0; /* DEV-06 */
  }
  PyErr_SetString(ref_fault_is(FAULT_DL_DEVICE_VALUEERROR) ? PyExc_ValueError
                                                           : PyExc_BufferError, /* DEV-05 */
                  "dl_device: this tensor exports to (1, 0) only");
  return -1;
}

PyObject *ref_tensor_dlpack(RefTensor *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None,
           *copy_obj = Py_None;
  /* API-01: keyword-only */
  const char *fmt = ref_fault_is(FAULT_POSITIONAL_ARGS) ? "|OOOO:__dlpack__"
                                                        : "|$OOOO:__dlpack__";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &stream, &max_version,
                                   &dl_device, &copy_obj))
    return NULL;
  if (check_stream(stream) < 0) return NULL;
  int versioned = wants_versioned(max_version);
  if (versioned < 0) return NULL;
  if (check_dl_device(dl_device) < 0) return NULL;
  if (copy_obj != Py_None && !PyBool_Check(copy_obj)) {
    PyErr_SetString(PyExc_TypeError, "copy must be None, True or False");
    return NULL;
  }
  int copy = copy_obj == Py_True && !ref_fault_is(FAULT_COPY_IGNORED); /* CPY-01..03 */
  if (copy_obj == Py_False && ref_fault_is(FAULT_COPY_FALSE_COPIES)) copy = 1; /* fault: CPY-02 */
  if (!self->exportable) {
    PyErr_SetString(ref_fault_is(FAULT_UNEXPORTABLE_TYPEERROR) ? PyExc_TypeError
                                                               : PyExc_BufferError, /* ERR-01 */
                    "this tensor cannot be exported");
    return NULL;
  }
  if (!versioned && self->subbyte) {
    PyErr_SetString(PyExc_BufferError,
                    "a padded sub-byte tensor needs IS_SUBBYTE_TYPE_PADDED: ask for "
                    "max_version >= (1, 1)");
    return NULL;
  }
  if (!versioned && self->readonly && !copy) {
    PyErr_SetString(PyExc_BufferError,
                    "a read-only tensor needs the READ_ONLY flag: ask for max_version >= (1, 0)");
    return NULL;
  }

  DLTensor dl;
  int64_t rm[REF_MAX_NDIM], scratch[REF_MAX_NDIM];
  ref_buf *buf = self->buf;
  uint64_t flags = ref_export_flags(self);
  ref_tensor_fill(self, &dl);
  if (copy) {
    buf = ref_copy_compact(self);
    if (!buf) return NULL;
    dl.data = buf->mem;
    dl.byte_offset = 0;
    if (dlc_row_major_strides(dl.ndim, dl.shape, rm) == 0 && dl.ndim > 0) dl.strides = rm;
    flags &= ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY; /* the copy is the consumer's */
    if (!ref_fault_is(FAULT_COPY_UNFLAGGED)) flags |= DLPACK_FLAG_BITMASK_IS_COPIED; /* FLG-04 */
  }

  void *managed;
  if (versioned && !copy) {
    managed = ref_export_versioned_nocopy(self);
  } else {
    apply_export_faults(&dl, versioned, scratch);
    managed = versioned ? (void *)ref_make_versioned(buf, &dl, flags)
                        : (void *)ref_make_legacy(buf, &dl);
  }
  if (copy) ref_buf_decref(buf); /* the struct holds its own reference */
  if (!managed) return PyErr_NoMemory();

  const char *name;
  if (versioned)
    name = ref_fault_is(FAULT_VERSIONED_CAPSULE_NAME) ? "dltensor-versioned"
                                                      : "dltensor_versioned"; /* CAP-02 */
  else
    name = ref_fault_is(FAULT_LEGACY_CAPSULE_NAME) ? "DLTensor" : "dltensor"; /* CAP-01 */
  return ref_capsule_new(managed, name, versioned, 1);
}
