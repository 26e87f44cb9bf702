/* forge: capsules over materialised records, with counted deleters. See forge.h. */
#include "forge.h"

#include "devmem.h"

#include <stdlib.h>
#include <string.h>

static const char *const kLegacyName = "dltensor";
static const char *const kVersionedName = "dltensor_versioned";
static const char *const kUsedLegacyName = "used_dltensor";
static const char *const kUsedVersionedName = "used_dltensor_versioned";

/* The export's memory: the host buffer, shape and strides, and the device block. */
static void free_memory(dlc_forged *f) {
  dlc_devmem_free(f->device);
  dlc_tensor_mem_free(&f->mem);
}

/* The deleter frees the tensor memory once; later calls only count. */
static void release(dlc_forged *f) {
  f->deleter_calls += 1;
  if (f->deleter_calls == 1) free_memory(f);
}

static void legacy_deleter(DLManagedTensor *self) {
  dlc_forged *f = self->manager_ctx;
  if (self != &f->legacy) f->bad_self = 1;
  release(f);
}

static void versioned_deleter(DLManagedTensorVersioned *self) {
  dlc_forged *f = self->manager_ctx;
  if (self != &f->ver) f->bad_self = 1;
  release(f);
}

/* Name equality as PyCapsule_IsValid judges it (both NULL, or equal strings), without the
 * strcmp libFuzzer intercepts and records when it mismatches. */
static int name_is(const char *name, const char *want) {
  if (name == want) return 1;
  if (name == NULL) return 0;
  while (*name != '\0' && *name == *want) ++name, ++want;
  return *name == *want;
}

/* CAP-05, CAP-06, CAP-07: the standard destructor. It runs from the capsule's dealloc, so
 * the capsule is a valid one (a capsule's pointer is never NULL): GetName and GetPointer
 * (with the capsule's own name) set no exception, and one already pending (the capsule
 * dies during unwinding) is preserved. The same decisions as PyCapsule_IsValid(capsule,
 * "dltensor"), then "dltensor_versioned". */
static void capsule_destructor(PyObject *capsule) {
  const char *name = PyCapsule_GetName(capsule);
  if (name_is(name, kLegacyName)) {
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, name);
    ((dlc_forged *)m->manager_ctx)->destructor_deleted = 1;
    if (m->deleter) m->deleter(m);
  } else if (name_is(name, kVersionedName)) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, name);
    ((dlc_forged *)m->manager_ctx)->destructor_deleted = 1;
    if (m->deleter) m->deleter(m);
  }
}

dlc_forged *dlc_forged_new(const dlc_record *r) {
  dlc_plan plan;
  dlc_rec_plan(r, DLC_REC_BUFFER_CAP, &plan);
  return dlc_forged_new_plan(r, &plan);
}

dlc_forged *dlc_forged_new_plan(const dlc_record *r, const dlc_plan *plan) {
  dlc_forged *f = calloc(1, sizeof *f);
  if (f == NULL) return NULL;
  if (dlc_rec_materialize_plan(r, plan, &f->mem) != 0) {
    free(f);
    return NULL;
  }
  f->base = (uintptr_t)f->mem.buffer;
  if (dlc_devmem_backs(r, plan)) {
    /* the same bytes at the same pad, on the device (devmem.h), still pending on the
     * producer's stream: __dlpack__ orders them (STR-01), and the offered tables'
     * current_work_stream names that stream (XAPI-19) */
    f->pending = 1;
    f->device = dlc_devmem_upload(f->mem.buffer, (size_t)f->mem.plan.size, f->pending);
    if (f->device == NULL) {
      dlc_tensor_mem_free(&f->mem);
      free(f);
      return NULL;
    }
    f->mem.t.data = (uint8_t *)f->device + f->mem.plan.pad;
    f->base = (uintptr_t)f->device;
  }
  int null_deleter = (r->kind & DLC_REC_DELETER_NULL) != 0;
  f->versioned = (r->kind & DLC_REC_VERSIONED) != 0;
  f->used = (r->kind & DLC_REC_USED_NAME) != 0;
  f->legacy.dl_tensor = f->mem.t;
  f->legacy.manager_ctx = f;
  f->legacy.deleter = null_deleter ? NULL : legacy_deleter;
  f->ver.version.major = r->version_major;
  f->ver.version.minor = r->version_minor;
  f->ver.manager_ctx = f;
  f->ver.deleter = null_deleter ? NULL : versioned_deleter;
  f->ver.flags = r->flags;
  f->ver.dl_tensor = f->mem.t;
  return f;
}

PyObject *dlc_forged_capsule(dlc_forged *f) {
  if (f->versioned)
    return PyCapsule_New(&f->ver, f->used ? kUsedVersionedName : kVersionedName,
                         capsule_destructor);
  return PyCapsule_New(&f->legacy, f->used ? kUsedLegacyName : kLegacyName, capsule_destructor);
}

int dlc_forged_capsule_unconsumed(PyObject *capsule) {
  const char *name = capsule ? PyCapsule_GetName(capsule) : NULL;
  if (name == NULL) PyErr_Clear();
  return name != NULL && (name_is(name, kLegacyName) || name_is(name, kVersionedName));
}

DLTensor dlc_forged_tensor(const dlc_forged *f, const dlc_record *r) {
  DLTensor t = f->mem.t;
  if (t.shape != NULL) t.shape = (int64_t *)r->shape;
  if (t.strides != NULL) t.strides = (int64_t *)r->strides;
  return t;
}

int dlc_forged_has_deleter(const dlc_forged *f) {
  return f->versioned ? f->ver.deleter != NULL : f->legacy.deleter != NULL;
}

void dlc_forged_free(dlc_forged *f) {
  if (f == NULL) return;
  if (f->deleter_calls == 0) free_memory(f);
  free(f);
}
