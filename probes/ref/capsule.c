/* capsule: the PyCapsules that carry ref's managed structs, and the standard capsule
 * destructor (CAP-05..08). A capsule's context says which struct it holds, whatever its
 * name; Tensor capsules feel the producer's destructor faults, Forge and DeviceTensor
 * capsules never do. */
#include "ref.h"

#include <string.h>

static const char kind_legacy_marker = 'L';
static const char kind_versioned_marker = 'V';

/* Calls the deleter, skipping a NULL one (CAP-07) unless null_too. */
static void call_deleter(void *managed, int kind_versioned, int null_too) {
  if (kind_versioned) {
    DLManagedTensorVersioned *m = managed;
    if (m->deleter || null_too) m->deleter(m);
  } else {
    DLManagedTensor *m = managed;
    if (m->deleter || null_too) m->deleter(m);
  }
}

/* An unconsumed capsule's deleter runs; a capsule renamed used_* is the consumer's and is
 * left alone; a NULL deleter is skipped; a failed pointer fetch is reported as unraisable
 * and never propagates. tensor: a Tensor capsule. */
static void capsule_release(PyObject *cap, int tensor) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  const char *name = PyCapsule_GetName(cap);
  if (!name && PyErr_Occurred()) {
    PyErr_WriteUnraisable(cap);
    goto done;
  }
  int calls_deleter = !(name && strncmp(name, "used_", 5) == 0); /* CAP-05, CAP-06 */
  if (tensor) calls_deleter = ref_twist_destructor(calls_deleter);
  if (!calls_deleter) goto done;
  if (tensor) ref_twist_at_exit(FAULT_DESTRUCTOR_DIES_AT_EXIT);
  void *ctx = PyCapsule_GetContext(cap);
  void *p = PyCapsule_GetPointer(cap, name);
  if (!p) {
    PyErr_WriteUnraisable(cap); /* CAP-08 */
    goto done;
  }
  if (ctx == &kind_versioned_marker || ctx == &kind_legacy_marker)
    call_deleter(p, ctx == &kind_versioned_marker,
                 tensor && ref_fault_is(FAULT_DESTRUCTOR_CALLS_NULL_DELETER));
done:
  PyErr_Restore(et, ev, tb);
}

static void tensor_capsule_destructor(PyObject *cap) { capsule_release(cap, 1); }
static void plain_capsule_destructor(PyObject *cap) { capsule_release(cap, 0); }

PyObject *ref_capsule_new(void *managed, const char *name, int kind_versioned, int tensor) {
  PyObject *cap =
      PyCapsule_New(managed, name, tensor ? tensor_capsule_destructor : plain_capsule_destructor);
  if (cap && PyCapsule_SetContext(cap, (void *)(kind_versioned ? &kind_versioned_marker
                                                               : &kind_legacy_marker)) == 0)
    return cap;
  Py_XDECREF(cap); /* context not yet set: the destructor does nothing */
  call_deleter(managed, kind_versioned, 0);
  return NULL;
}
