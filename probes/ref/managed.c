/* managed: the DLManagedTensorVersioned and DLManagedTensor structs ref hands out, and their
 * deleters.
 *
 * Invariants:
 *  - every struct holds one reference to its ref_buf, so data stays valid until its deleter
 *    runs, whatever happens to the Tensor (OWN-05), and owns copies of shape and strides;
 *  - deleters free the struct (OWN-02) and may run on any thread, without the GIL, after
 *    finalisation (OWN-04). Only the GIL-counted deleter touches Python: it takes the GIL
 *    when its thread lacks it, and leaks once the interpreter is finalising;
 *  - a versioned struct is refcounted: each hand-out's deleter drops one reference, so the
 *    cached export (cache.c) can hand one struct out several times. */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

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

/* A released hand-out of the cached export leaves the shared struct as it is (OWN-05). */
static void handout_released(ref_managed_v *v) {
  if (v->cached) ref_twist_released_handout(v->dims, 2 * (size_t)v->m.dl_tensor.ndim);
}

/* Any thread, no GIL, no Python (OWN-04): one hand-out's reference goes. */
static void versioned_deleter(DLManagedTensorVersioned *self) {
  ref_twist_at_exit(FAULT_DELETER_DIES_AT_EXIT);
  ref_managed_v *v = (ref_managed_v *)self;
  handout_released(v);
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

static void versioned_deleter_gil(DLManagedTensorVersioned *self) {
  ref_twist_at_exit(FAULT_DELETER_DIES_AT_EXIT);
  ref_managed_v *v = (ref_managed_v *)self;
  handout_released(v);
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
  v->m.version = ref_twist_version((DLPackVersion){REF_SPEC_MAJOR, REF_SPEC_MINOR}); /* VER-07 */
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
  ref_twist_at_exit(FAULT_DELETER_DIES_AT_EXIT);
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

void *ref_make_managed(ref_buf *buf, const DLTensor *t, uint64_t flags, int versioned) {
  return versioned ? (void *)ref_make_versioned(buf, t, flags) : (void *)ref_make_legacy(buf, t);
}
