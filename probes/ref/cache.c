/* cache: one DLManagedTensorVersioned per tensor, shared by every no-copy versioned
 * export (__dlpack__ and managed_tensor_from_py_object_no_sync).
 *
 * Two disciplines, one per interpreter kind (both stressed under TSan, tsan_cache.c):
 *  - GIL builds (ref_cache_handout_gil): the slot and the count are plain and touched only
 *    with the GIL held; the deleter takes the GIL when its thread lacks it. A hand-out
 *    plus its deleter on a GIL-holding thread runs no locked instruction (issue 6 bound).
 *  - free-threaded builds (ref_cache_handout, Py_GIL_DISABLED): CAS publication and
 *    atomic counts, with the invariants below, safe with no GIL at all.
 *
 * Invariants of the free-threaded discipline:
 *  - the slot goes from NULL to one struct exactly once per tensor: racing creators each
 *    build a candidate and publish it with a compare-and-swap; a loser frees its own;
 *  - the struct's refcount is the hand-outs in flight plus one for the tensor; each
 *    hand-out's deleter drops one, tensor dealloc drops the tensor's, the last frees it;
 *  - its contents never change after publication: the flags depend only on readonly and
 *    the dtype, which are fixed per tensor, and faults that alter exports bypass the cache;
 *  - the hand-out path never touches Python, so it is safe without the GIL. */
#include <time.h>
#include "ref.h"

DLManagedTensorVersioned *ref_cache_handout(RefTensor *t) {
  DLManagedTensorVersioned *cur = atomic_load_explicit(&t->cache, memory_order_acquire);
  if (!cur) {
    DLTensor dl;
    ref_tensor_fill(t, &dl);
    DLManagedTensorVersioned *cand = ref_make_versioned(t->buf, &dl, ref_export_flags(t, 0));
    if (!cand) return NULL;
    ref_versioned_mark_cached(cand); /* before publication: never changes afterwards */
    if (ref_fault_is(FAULT_CACHE_NO_CAS)) {
      /* fault cache_no_cas: a plain, non-atomic store (a data race for TSan). Racing
       * creators both publish; the overwritten candidate keeps the tensor's reference
       * forever, and concurrent hand-outs get different structs. The pause between the
       * load of the slot and the store widens the race window so that checks see it
       * reliably on a loaded machine; it changes nothing TSan sees. */
      struct timespec pause = {0, 200 * 1000};
      nanosleep(&pause, NULL);
      DLManagedTensorVersioned **plain = (DLManagedTensorVersioned **)(void *)&t->cache;
      *plain = cand;
      cur = cand;
    } else {
      DLManagedTensorVersioned *expected = NULL;
      if (atomic_compare_exchange_strong_explicit(&t->cache, &expected, cand,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
        cur = cand;
      } else {
        ref_versioned_release(cand); /* lost the race: the winner's struct is used */
        cur = expected;
      }
    }
  }
  ref_versioned_retain(cur);
  return cur;
}

/* GIL held. The struct's count is the hand-outs in flight plus one for the tensor; its
 * contents never change after it is stored (as above). */
DLManagedTensorVersioned *ref_cache_handout_gil(RefTensor *t) {
  DLManagedTensorVersioned *m = t->cache_gil;
  if (!m) {
    DLTensor dl;
    ref_tensor_fill(t, &dl);
    m = ref_make_versioned(t->buf, &dl, ref_export_flags(t, 0));
    if (!m) return NULL;
    ref_versioned_mark_cached(m);
    ref_versioned_use_gil_count(m); /* the tensor's reference */
    t->cache_gil = m;
  }
  ref_versioned_retain_gil(m);
  return m;
}

void ref_cache_release(RefTensor *t) {
  DLManagedTensorVersioned *m = atomic_exchange_explicit(&t->cache, NULL, memory_order_acq_rel);
  if (m) ref_versioned_release(m); /* direct call: m->deleter may be a probe trampoline */
  m = t->cache_gil;
  t->cache_gil = NULL;
  if (m) ref_versioned_release_gil(m);
}
