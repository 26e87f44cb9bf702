/* target_producer: fuzzed view parameters build a native tensor in a producer. It is then
 * exported through __dlpack__ and, when its type offers one, the C exchange API.
 *
 * DLCONFORM_FUZZ_PRODUCER picks the producer: numpy (default), torch, ref, or any module with
 * from_dlpack, whose arrays are its imports of compact exports (producer_views); NAME@cuda (or
 * DLCONFORM_FUZZ_DEVICE=cuda) is its CUDA mode, a view in CUDA memory judged with the CUDA
 * meanings of the keywords (producer_cuda.h; torch, cupy, ref, dlconform.pyref). The record's
 * fields become view parameters (dlconform.fuzz.producer_views.build is the Python side):
 *   - ndim 0..4 ((uint8)ndim % 5), shape[i] = shape % 5, element strides[i] = strides % 9
 *     (negative and zero included);
 *   - element offset = byte_offset % 64 into a 64-element base;
 *   - dtype: one of the 13 array-API dtypes (DT-12), chosen from (code, bits);
 *   - read-only from flags bit 0 (never in the CUDA mode: torch and cupy cannot say it),
 *     buffer bytes from fill_seed;
 *   - keywords from kw: max_version, copy, dl_device, stream (None, the int, or a str).
 * A view the library cannot express is skipped (build returns None).
 *
 * Oracles (dlconform-oracle: CLAUSE: message, then abort; why: fuzz/README.md, "Why these
 * oracles"):
 *   - EXC: __dlpack__ failed with a class other than BufferError, TypeError, ValueError,
 *     MemoryError, or returned NULL without an exception. Exception: refusing a stream
 *     other than None (STR-10) may take any class but SystemError (ERR-01).
 *   - STR-10 / STR-02: a stream other than None for a CPU tensor was accepted (stream=-1 is
 *     a SHOULD-level finding, as the suite judges it).
 *   - DEV-05: a dl_device other than (1, 0) was accepted, or a defined non-CPU one was
 *     refused with a class other than BufferError (TypeError passes: an old producer,
 *     VER-06).
 *   - CAP-01 / CAP-02 / VER-02 / VER-03 / VER-04: the capsule name does not fit max_version.
 *   - any clause dlc_check_managed / dlc_check_versioned reports (MUST clauses only: LAY-04
 *     and LAY-01 are SHOULDs).
 *   - FLG-02: a read-only view exported versioned without READ_ONLY. FLG-04: copy=True
 *     without IS_COPIED.
 *   - SEM-01: the values read through the export differ from the view's, or the export
 *     copies though copy was not True. The expected bytes come from the view parameters,
 *     not from the library. CPY-01: copy=True exported the view's own memory.
 *   - LAY-05: such a SEM-01 that the strides explain once divided by the item size (strides
 *     counted in bytes, not elements).
 *   - OWN-03 (ASan): the deleter faults or double-frees; it is called once, as a consumer
 *     would.
 * Exchange API: managed_tensor_from_py_object_no_sync(view) gets the same metadata, value and
 * flag oracles (XAPI-14 when it fails without an exception).
 * dlconform/fuzz/producer_oracles.py is this file in Python, for reproducers
 * (fuzz/tests/test_oracle_agreement.py holds the two together). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "devmem.h"
#include "oracle.h"
#include "producer_cuda.h"
#include "pyhost.h"
#include "record.h"

#define BASE_ELEMENTS 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static PyObject *build_fn;     /* dlconform.fuzz.producer_views.build */
static const char *producer;   /* DLCONFORM_FUZZ_PRODUCER */
static const uint8_t k_dtypes[][2] = {{6, 8}, {0, 8},  {0, 16}, {0, 32}, {0, 64}, {1, 8}, {1, 16},
                                      {1, 32}, {1, 64}, {2, 32}, {2, 64}, {5, 64}, {5, 128}};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  producer = getenv("DLCONFORM_FUZZ_PRODUCER");
  if (producer == NULL || *producer == '\0') producer = "numpy";
  /* NAME@DEVICE: NAME in that device mode (DLCONFORM_FUZZ_DEVICE, checked by dlc_pcuda_init) */
  static char name[256];
  const char *at = strchr(producer, '@');
  if (at != NULL && (size_t)(at - producer) < sizeof name) {
    memcpy(name, producer, (size_t)(at - producer));
    name[at - producer] = '\0';
    setenv("DLCONFORM_FUZZ_DEVICE", at + 1, 1);
    producer = name;
  }
  setenv("DLCONFORM_FUZZ_CONSUMER", producer, 1); /* pyhost imports the library */
  dlc_pyhost_role = "producer";
  dlc_pyhost_init();
  PyObject *mod = PyImport_ImportModule("dlconform.fuzz.producer_views");
  build_fn = mod ? PyObject_GetAttrString(mod, "build") : NULL;
  if (build_fn == NULL) {
    PyErr_Print();
    exit(2);
  }
  dlc_pcuda_init(producer); /* producer-NAME@cuda: DLCONFORM_FUZZ_DEVICE=cuda */
  /* a library that is no producer, or whose import of a plain array fails, cannot be fuzzed */
  PyObject *why = PyObject_CallMethod(mod, "unusable", "sz", producer, dlc_pcuda_active() ? "cuda" : NULL);
  Py_DECREF(mod);
  if (why == NULL) PyErr_Print();
  if (why == NULL || why != Py_None) {
    fprintf(stderr, "dlconform-fuzz: %s\n", why && PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : "the producer "
            "target cannot start");
    exit(2);
  }
  Py_DECREF(why);
  return 0;
}

/* The DTYPES index of (code, bits) when it is an array-API dtype, else a hash of both. */
static int dtype_index(const dlc_record *r) {
  for (int i = 0; i < 13; ++i)
    if (k_dtypes[i][0] == r->code && k_dtypes[i][1] == r->bits) return i;
  return (r->code + r->bits) % 13;
}

static PyObject *build_view(const dlc_record *r) {
  int nd = (uint8_t)r->ndim % 5;
  PyObject *shape = PyTuple_New(nd), *strides = PyTuple_New(nd);
  for (int i = 0; shape && strides && i < nd; ++i) {
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong((long long)((uint64_t)r->shape[i] % 5)));
    PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong((long long)(r->strides[i] % 9)));
  }
  PyObject *res = shape && strides
                      ? PyObject_CallFunction(build_fn, "siOOiiiz", producer, dtype_index(r), shape,
                                              strides, (int)(r->byte_offset % BASE_ELEMENTS),
                                              (int)(r->flags & 1), (int)r->fill_seed,
                                              dlc_pcuda_active() ? "cuda" : NULL)
                      : NULL;
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return res;
}

/* kw[name] = v, stealing v (NULL: nothing is set; the keyword is then absent). */
static void put_new(PyObject *kw, const char *name, PyObject *v) {
  if (v) PyDict_SetItemString(kw, name, v);
  Py_XDECREF(v);
}

static PyObject *build_kwargs(const dlc_record *r) {
  PyObject *kw = PyDict_New();
  if (kw == NULL) return NULL;
  if (r->kw & DLC_KW_MAX_VERSION)
    put_new(kw, "max_version", Py_BuildValue("(ii)", r->kw_max_major, r->kw_max_minor));
  if (r->kw & DLC_KW_COPY) {
    int c = r->kw_copy % 3;
    PyDict_SetItemString(kw, "copy", c == DLC_COPY_NONE ? Py_None : c == DLC_COPY_TRUE ? Py_True : Py_False);
  }
  if (r->kw & DLC_KW_DL_DEVICE)
    put_new(kw, "dl_device", Py_BuildValue("(ii)", r->kw_dev_type, r->kw_dev_id));
  if (r->kw & DLC_KW_STREAM) {
    int k = r->kw_stream_kind % 3;
    put_new(kw, "stream", k == DLC_STREAM_NONE ? (Py_INCREF(Py_None), Py_None)
                          : k == DLC_STREAM_INT ? PyLong_FromLongLong(dlc_pcuda_active()
                                                                          ? dlc_pcuda_stream(r->kw_stream)
                                                                          : r->kw_stream)
                                                : PyUnicode_FromString("stream"));
  }
  return kw;
}

/* Fails CLAUSE with "LEAD CLASS TAIL: str(exception)" for the pending exception; clears it. */
static void fail_with_pending(const char *clause, const char *lead, const char *tail) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *s = value ? PyObject_Str(value) : NULL;
  const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
  dlc_oracle_fail(clause, "%s %s%s: %s", lead, type ? ((PyTypeObject *)type)->tp_name : "?", tail,
                  m ? m : "?");
  Py_XDECREF(s);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
}

/* any_class: the call carried an argument the producer must refuse without the spec naming the
 * class (STR-10: a stream other than None on a CPU tensor; ERR-01: bad arguments "raise other
 * exceptions"), so only a broken refusal is a finding: SystemError, or no exception set. */
static void check_exception(const char *what, int any_class) {
  PyObject *type = PyErr_Occurred();
  if (type == NULL) {
    dlc_oracle_fail("EXC", "%s failed without setting an exception", what);
    return;
  }
  int allowed = any_class ? !PyErr_GivenExceptionMatches(type, PyExc_SystemError)
                          : dlc_pyhost_exception_allowed(type);
  if (allowed) {
    PyErr_Clear();
    return;
  }
  char lead[96];
  snprintf(lead, sizeof lead, "%s raised", what);
  fail_with_pending("EXC", lead, "");
}

/* A dl_device a CPU tensor may not be exportable to, and that is no bad argument: a defined
 * non-CPU DLDeviceType with an id >= 0 (a CPU pair other than (1, 0), a negative id or an
 * undefined type may be refused as a bad argument, with any class: ERR-01). */
static int foreign_device(const dlc_record *r) {
  return (r->kw & DLC_KW_DL_DEVICE) && r->kw_dev_type != kDLCPU && r->kw_dev_id >= 0 &&
         dlc_is_known_device(r->kw_dev_type, 1, 3);
}

/* DEV-05: a producer that cannot handle the requested dl_device must raise BufferError
 * (CPY-05: also when copy=False forbids the copy it needs; clause says which). TypeError is
 * left alone: an old producer rejects the unknown keyword (VER-06). */
static void check_device_refusal(const dlc_record *r, const char *clause) {
  PyObject *type = PyErr_Occurred();
  if (type == NULL || PyErr_GivenExceptionMatches(type, PyExc_SystemError)) {
    check_exception("__dlpack__", 0);
    return;
  }
  if (PyErr_GivenExceptionMatches(type, PyExc_BufferError) ||
      PyErr_GivenExceptionMatches(type, PyExc_TypeError)) {
    PyErr_Clear();
    return;
  }
  char lead[96];
  snprintf(lead, sizeof lead, "__dlpack__ refused dl_device=(%d, %d) with", r->kw_dev_type,
           r->kw_dev_id);
  fail_with_pending(clause, lead, ", not BufferError");
}

/* The elements of t (extent e, first element at `first`) into host memory, when `where` says
 * they lie on the device: the n = hi - lo bytes from first + lo, read as a consumer on `stream`
 * reads them (devmem.h's read_on: a copy enqueued there, then that stream synchronised), or, for 0,
 * after the device ran what it holds. Returns the host copy (free it), or NULL: *unreadable is
 * then 1 when the runtime refused the read (the export names memory it cannot read), 0 when
 * the host had no memory for the copy. */
static uint8_t *device_copy(const uint8_t *first, const dlc_extent *e, uintptr_t stream, int *unreadable) {
  size_t n = (size_t)(e->hi - e->lo);
  uint8_t *buf = malloc(n ? n : 1);
  *unreadable = 0;
  if (buf && (stream ? dlc_devmem_read_on(buf, first + e->lo, n, stream)
                     : dlc_devmem_read_settled(buf, first + e->lo, n)) != 0) {
    free(buf);
    *unreadable = 1;
    return NULL;
  }
  return buf;
}

/* The first element (row-major) whose bytes at `bytes` (the byte at first + lo + k is
 * bytes[k]) differ from want's, or -1. */
static long long first_difference(const DLTensor *t, const int64_t *st, const dlc_extent *e,
                                  const uint8_t *bytes, const char *want) {
  uint64_t idx[8] = {0};
  for (uint64_t flat = 0; flat < e->numel; ++flat) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; ++d) off += (int64_t)idx[d] * st[d] * (int64_t)e->itemsize;
    if (memcmp(bytes + (off - e->lo), want + flat * e->itemsize, e->itemsize) != 0) return (long long)flat;
    for (int d = t->ndim - 1; d >= 0; --d)
      if (++idx[d] < (uint64_t)t->shape[d]) break;
      else idx[d] = 0;
  }
  return -1;
}

/* The export a library's array was imported from (producer_views: a library with no view maker
 * here): its memory [src_base, src_base + src_nbytes) and whether it was read-only; src_nbytes
 * 0 for a view made here, whose read-only flag is the record's. */
static uintptr_t src_base;
static uint64_t src_nbytes;

/* 1 when t's elements lie in the imported export's memory. */
static int in_source(const DLTensor *t, const dlc_extent *e) {
  if (src_nbytes == 0 || e->status != DLC_EXTENT_OK || e->zero_size) return 0;
  uintptr_t first = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  return first + (uintptr_t)e->lo >= src_base && first + (uintptr_t)e->hi <= src_base + src_nbytes;
}

/* LAY-05 (strides count elements, not bytes): 1 when t's strides `st`, each divided by the item
 * size, describe the tensor, where as given they do not (the caller is about to fail SEM-01):
 * every stride of a dimension of extent > 1 is a whole number of items (item size > 1, not all
 * 0), the view so described lies in [base, base + nbytes) when base is not 0 (the tensor's
 * memory, which the export as given leaves), and its elements, read there (on the device once
 * it ran what it holds), are the tensor's values `want`. Reading is safe: the view so described
 * lies within the export's own extent, which the caller reads too (divided strides reach less
 * far on either side of the first element). */
static int strides_in_bytes(const DLTensor *t, const int64_t *st, uint64_t itemsize, int device,
                            uintptr_t base, long nbytes, const char *want) {
  if (itemsize < 2 || t->ndim > 8) return 0;
  int64_t el[8];
  int moves = 0;
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] > 1 && st[d] % (int64_t)itemsize != 0) return 0;
    el[d] = st[d] / (int64_t)itemsize;
    moves |= t->shape[d] > 1 && el[d] != 0;
  }
  if (!moves) return 0;
  DLTensor u = *t;
  u.strides = el;
  dlc_extent e = dlc_extent_of(&u);
  const uint8_t *first = (const uint8_t *)t->data + t->byte_offset;
  uintptr_t lo = (uintptr_t)(first + e.lo), hi = (uintptr_t)(first + e.hi);
  if (e.status != DLC_EXTENT_OK || e.zero_size || (base != 0 && (lo < base || hi > base + (uintptr_t)nbytes)))
    return 0;
  int unreadable = 0;
  uint8_t *bytes = device ? device_copy(first, &e, 0, &unreadable) : NULL;
  if (device && bytes == NULL) return 0;
  int same = first_difference(&u, el, &e, bytes ? bytes : first + e.lo, want) < 0;
  free(bytes);
  return same;
}

#define LAY05_MSG "%s: the strides count bytes, not elements: divided by the item size they describe the tensor"

/* SEM-01 (values), zero-copy and copy oracles on an exported tensor; check first. In the CUDA
 * mode the export's device comes first (producer_cuda.h): it says where the elements are. A
 * SEM-01 that strides counted in bytes explain is LAY-05 (strides_in_bytes). */
static void check_tensor(const char *via, const DLTensor *t, uint64_t flags, int versioned,
                         const dlc_record *r, PyObject *expected, uintptr_t base, long nbytes) {
  dlc_report rep;
  dlc_report_init(&rep);
  dlc_check_tensor(t, versioned ? DLC_CAPSULE_VERSIONED : DLC_CAPSULE_LEGACY, 1, 3, 0, &rep);
  for (int i = 0; i < rep.count; ++i)
    if (strcmp(rep.items[i].clause, "LAY-04") && strcmp(rep.items[i].clause, "LAY-01"))
      return dlc_oracle_fail(rep.items[i].clause, "%s: %s", via, rep.items[i].message);
  int where = dlc_pcuda_active()
                  ? dlc_pcuda_placed(r, t, versioned, flags, strcmp(via, "__dlpack__") ? "XAPI-14" : "DEV-03")
                  : DLC_PCUDA_READ_HOST;
  int copy = (r->kw & DLC_KW_COPY) ? r->kw_copy % 3 : -1;
  dlc_extent e = dlc_extent_of(t);
  /* a copy (IS_COPIED) belongs to the consumer and may drop READ_ONLY (FLG-05) */
  if (versioned && (r->flags & 1) && !(flags & DLPACK_FLAG_BITMASK_READ_ONLY) &&
      !(flags & DLPACK_FLAG_BITMASK_IS_COPIED) && (src_nbytes == 0 || in_source(t, &e)))
    dlc_oracle_fail("FLG-02", "%s: a read-only view exported without READ_ONLY", via);
  /* (a host copy of a CUDA view was judged on IS_COPIED by dlc_pcuda_placed) */
  if (versioned && copy == DLC_COPY_TRUE && !(flags & DLPACK_FLAG_BITMASK_IS_COPIED) &&
      !(dlc_pcuda_active() && where == DLC_PCUDA_READ_HOST))
    dlc_oracle_fail("FLG-04", "%s: copy=True exported without IS_COPIED", via);
  /* an export that lies in the export the array was imported from copied nothing (CPY-01) */
  if (copy == DLC_COPY_TRUE && base == 0 && in_source(t, &e))
    dlc_oracle_fail("CPY-01", "%s: copy=True exported the memory the array was imported from", via);
  if (where == DLC_PCUDA_READ_NONE || e.status != DLC_EXTENT_OK || e.zero_size) return;
  int64_t rm[8];
  const int64_t *st = t->strides;
  if (st == NULL && (t->ndim > 8 || dlc_row_major_strides(t->ndim, t->shape, rm) != 0)) return;
  if (st == NULL) st = rm;
  const uint8_t *first = (const uint8_t *)t->data + t->byte_offset;
  const char *want = PyBytes_AsString(expected);
  Py_ssize_t want_n = PyBytes_Size(expected);
  int device = where == DLC_PCUDA_READ_DEVICE;
  /* the view's memory (base 0: unknown, a library that does not say where its array lies); a
   * host copy of a CUDA view (dl_device=(1, 0)) is a copy by definition */
  if (base != 0 && (!dlc_pcuda_active() || device)) {
    uintptr_t lo = (uintptr_t)(first + e.lo), hi = (uintptr_t)(first + e.hi);
    int inside = lo >= base && hi <= base + (uintptr_t)nbytes;
    if (copy == DLC_COPY_TRUE && inside)
      dlc_oracle_fail("CPY-01", "%s: copy=True exported the view's own memory", via);
    if (copy != DLC_COPY_TRUE && !inside && !(flags & DLPACK_FLAG_BITMASK_IS_COPIED)) {
      if (want != NULL && (uint64_t)want_n == e.numel * e.itemsize &&
          strides_in_bytes(t, st, e.itemsize, device, base, nbytes, want))
        return dlc_oracle_fail("LAY-05", LAY05_MSG, via);
      dlc_oracle_fail("SEM-01", "%s: the export does not view the tensor's memory (copy not asked)", via);
    }
  }
  if (want == NULL || (uint64_t)want_n != e.numel * e.itemsize) {
    PyErr_Clear();
    return dlc_oracle_fail("SEM-01", "%s: %llu elements of %llu bytes exported, the view has %zd bytes",
                           via, (unsigned long long)e.numel, (unsigned long long)e.itemsize, want_n);
  }
  /* a device export is read first as the consumer reads it, on the stream it named (STR-01): a
   * difference there that a read after the whole device is gone is the stream order's */
  uintptr_t on = device && !strcmp(via, "__dlpack__") ? dlc_pcuda_read_stream(r) : 0;
  int unreadable = 0;
  uint8_t *copy_of = device ? device_copy(first, &e, on, &unreadable) : NULL;
  if (unreadable && on) { /* the stream is gone (dlc_pcuda_after's STR-11): read without it */
    on = 0;
    copy_of = device_copy(first, &e, 0, &unreadable);
  }
  if (unreadable && strides_in_bytes(t, st, e.itemsize, 1, 0, 0, want))
    return dlc_oracle_fail("LAY-05", LAY05_MSG, via);
  if (unreadable) /* the runtime reads any live device memory: the export names none */
    return dlc_oracle_fail("SEM-01", "%s: the export's elements (%lld bytes from data + byte_offset %+lld) are "
                           "no device memory the runtime can read", via, (long long)(e.hi - e.lo), (long long)e.lo);
  if (device && copy_of == NULL) return; /* no host memory: not the producer's */
  long long bad = first_difference(t, st, &e, copy_of ? copy_of : first + e.lo, want);
  free(copy_of);
  if (bad >= 0 && on) {
    copy_of = device_copy(first, &e, 0, &unreadable);
    long long settled = copy_of ? first_difference(t, st, &e, copy_of, want) : bad;
    free(copy_of);
    if (settled < 0)
      return dlc_oracle_fail(dlc_pcuda_stream_clause(r), "%s: what the consumer's stream reads right after it "
                             "returned differs at element %lld from what the tensor holds once its stream ran: it "
                             "did not make that stream wait (STR-01)", via, bad);
  }
  if (bad >= 0 && strides_in_bytes(t, st, e.itemsize, device, 0, 0, want))
    return dlc_oracle_fail("LAY-05", LAY05_MSG, via);
  if (bad >= 0)
    dlc_oracle_fail("SEM-01", "%s: element %lld differs from the tensor's value", via, bad);
}

/* The capsule's name against the max_version asked (VER-02, VER-03, VER-04; CAP-01/02). */
static int check_name(const dlc_record *r, PyObject *cap) {
  const char *name = PyCapsule_GetName(cap);
  int versioned = name && strcmp(name, "dltensor_versioned") == 0;
  if (!versioned && !(name && strcmp(name, "dltensor") == 0))
    dlc_oracle_fail("CAP-01", "__dlpack__ returned a capsule named %s", name ? name : "NULL");
  int asked = (r->kw & DLC_KW_MAX_VERSION) ? r->kw_max_major : -1;
  if (versioned && asked < 1)
    dlc_oracle_fail(asked < 0 ? "VER-02" : "VER-04", "versioned capsule for max_version %s",
                    asked < 0 ? "None" : "(0, x)");
  return versioned;
}

static void export_dunder(const dlc_record *r, PyObject *view, PyObject *expected, uintptr_t base,
                          long nbytes) {
  PyObject *kw = build_kwargs(r), *empty = PyTuple_New(0);
  PyObject *meth = PyObject_GetAttrString(view, "__dlpack__");
  PyObject *cap = kw && empty && meth ? PyObject_Call(meth, empty, kw) : NULL;
  Py_XDECREF(kw);
  Py_XDECREF(empty);
  Py_XDECREF(meth);
  int odd_stream = (r->kw & DLC_KW_STREAM) && r->kw_stream_kind % 3 != DLC_STREAM_NONE;
  if (cap == NULL && dlc_pcuda_active()) {
    int rule = dlc_pcuda_refusal_rule(r);
    if (rule == DLC_PCUDA_REFUSE_DEVICE || rule == DLC_PCUDA_REFUSE_COPY)
      return check_device_refusal(r, rule == DLC_PCUDA_REFUSE_COPY ? "CPY-05" : "DEV-05");
    return check_exception("__dlpack__", rule == DLC_PCUDA_REFUSE_ANY);
  }
  if (cap == NULL && !odd_stream && foreign_device(r)) return check_device_refusal(r, "DEV-05");
  if (cap == NULL) return check_exception("__dlpack__", odd_stream);
  if (dlc_pcuda_active()) {
    dlc_pcuda_arguments(r);
    odd_stream = 0; /* the CUDA meanings replace the CPU tensor's rules below */
  }
  /* Messages with DLC_AMBIGUOUS or DLC_INVALID_ARGUMENT are reported at SHOULD (a warn), as
   * the suites grade them:
   *   - a stream other than None for a CPU tensor is an invalid argument (STR-10, STR-02):
   *     accepting it warns; stream=-1 is moreover harmless, as it asks for no synchronisation;
   *   - a CPU id other than 0 names no device (DEV-02) and the export may stay on (1, 0). */
  if (odd_stream)
    dlc_oracle_fail(r->kw_stream_kind % 3 == DLC_STREAM_INT ? "STR-10" : "STR-02",
                    "__dlpack__ accepted stream=%s for a CPU tensor%s",
                    r->kw_stream_kind % 3 != DLC_STREAM_INT ? "'stream'"
                    : r->kw_stream == -1                     ? "-1"
                                                             : "<int>",
                    r->kw_stream_kind % 3 == DLC_STREAM_INT && r->kw_stream == -1
                        ? " " DLC_AMBIGUOUS "it asks for no synchronisation)"
                        : " " DLC_INVALID_ARGUMENT "the behaviour is unspecified)");
  if (!dlc_pcuda_active() && r->kw & DLC_KW_DL_DEVICE && !(r->kw_dev_type == kDLCPU && r->kw_dev_id == 0))
    dlc_oracle_fail("DEV-05", "__dlpack__ accepted dl_device=(%d, %d) for a CPU tensor%s",
                    r->kw_dev_type, r->kw_dev_id,
                    r->kw_dev_type == kDLCPU ? " " DLC_AMBIGUOUS "a CPU device id that is not zero)" : "");
  int versioned = check_name(r, cap);
  void *p = PyCapsule_GetPointer(cap, versioned ? "dltensor_versioned" : "dltensor");
  if (p == NULL) {
    PyErr_Clear();
    Py_DECREF(cap);
    return;
  }
  dlc_report rep;
  dlc_report_init(&rep);
  if (versioned) dlc_check_versioned(p, 1, 3, &rep);
  for (int i = 0; i < rep.count; ++i)
    if (strncmp(rep.items[i].clause, "LAY-0", 5) && strncmp(rep.items[i].clause, "DT-", 3))
      dlc_oracle_fail(rep.items[i].clause, "__dlpack__: %s", rep.items[i].message);
  DLManagedTensorVersioned *mv = p;
  DLManagedTensor *ml = p;
  check_tensor("__dlpack__", versioned ? &mv->dl_tensor : &ml->dl_tensor,
               versioned ? mv->flags : 0, versioned, r, expected, base, nbytes);
  /* consume it as a consumer would: rename, then call the deleter once (OWN-01, OWN-03) */
  if (PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor") == 0) {
    if (versioned && mv->deleter) mv->deleter(mv);
    if (!versioned && ml->deleter) ml->deleter(ml);
  }
  PyErr_Clear();
  Py_DECREF(cap);
  if (dlc_pcuda_active()) dlc_pcuda_after(r);
}

/* The C exchange API of the view's type, when offered (XAPI-14). */
static void export_xapi(const dlc_record *r, PyObject *view, PyObject *expected, uintptr_t base,
                        long nbytes) {
  PyObject *c = PyObject_GetAttrString((PyObject *)Py_TYPE(view), "__dlpack_c_exchange_api__");
  if (c == NULL || !PyCapsule_IsValid(c, "dlpack_exchange_api")) {
    Py_XDECREF(c);
    PyErr_Clear();
    return;
  }
  const DLPackExchangeAPI *api = PyCapsule_GetPointer(c, "dlpack_exchange_api");
  Py_DECREF(c); /* the table is static for the type (XAPI-05) */
  if (api == NULL || api->header.version.major != 1 || api->managed_tensor_from_py_object_no_sync == NULL)
    return;
  DLManagedTensorVersioned *out = NULL;
  if (api->managed_tensor_from_py_object_no_sync(view, &out) != 0 || out == NULL) {
    if (!PyErr_Occurred()) dlc_oracle_fail("XAPI-14", "managed_tensor_from_py_object_no_sync failed "
                                           "without a Python exception");
    return check_exception("managed_tensor_from_py_object_no_sync", 0);
  }
  dlc_record plain = *r;
  plain.kw = 0; /* the exchange API takes no keywords */
  check_tensor("exchange API", &out->dl_tensor, out->flags, 1, &plain, expected, base, nbytes);
  if (out->deleter) out->deleter(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlc_record r;
  dlc_rec_decode(data, size, &r);
  if (dlc_pcuda_active()) r.flags &= ~1u; /* a device view is never read-only */
  PyObject *res = build_view(&r);
  if (res == NULL || res == Py_None) {
    if (res == NULL) check_exception("building the view", 0);
    Py_XDECREF(res);
    return 0;
  }
  /* a library's own array (producer_views: its from_dlpack of our export): item 5 is that
   * export's (address, bytes, read-only); the array is read-only where it views it */
  src_base = 0, src_nbytes = 0;
  if (PyTuple_Check(res) && PyTuple_GET_SIZE(res) > 5) {
    unsigned long long addr = 0, n = 0;
    int read_only = 0;
    if (PyArg_ParseTuple(PyTuple_GET_ITEM(res, 5), "KKp", &addr, &n, &read_only))
      src_base = (uintptr_t)addr, src_nbytes = n;
    if (!read_only || src_nbytes == 0) r.flags &= ~1u;
    PyErr_Clear();
  }
  PyObject *view = PyTuple_GetItem(res, 0), *expected = PyTuple_GetItem(res, 1);
  uintptr_t base = (uintptr_t)PyLong_AsVoidPtr(PyTuple_GetItem(res, 3));
  long nbytes = PyLong_AsLong(PyTuple_GetItem(res, 4));
  export_dunder(&r, view, expected, base, nbytes);
  export_xapi(&r, view, expected, base, nbytes);
  Py_DECREF(res);
  PyErr_Clear();
  return 0;
}
