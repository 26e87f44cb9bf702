/* forge: a PyCapsule built in C from a record, with a counted deleter.
 *
 * Ownership (OWN-02 .. OWN-05 from the producer side):
 *   - dlc_forged is owned by the harness, never by the consumer: it outlives every deleter
 *     call, so a second deleter call is counted (and seen by ASan as nothing worse), and the
 *     harness frees it with dlc_forged_free after its last oracle.
 *   - The deleter frees the tensor memory (buffer, shape, strides) and counts the call, so
 *     a consumer that reads after calling it reads freed (ASan) or unmapped memory.
 *   - The capsule carries the standard destructor: it calls the deleter only while the
 *     capsule still has its unconsumed name (CAP-05, CAP-06) and skips a NULL deleter
 *     (CAP-07). Names are static strings (CAP-09). */
#ifndef DLCONFORM_FUZZ_FORGE_H
#define DLCONFORM_FUZZ_FORGE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "layout.h"
#include "record.h"

typedef struct {
  DLManagedTensor legacy;        /* exported when the record is legacy */
  DLManagedTensorVersioned ver;  /* exported when the record is versioned */
  dlc_tensor_mem mem;
  int versioned;
  int used;                      /* capsule created with its used_* name: nobody may call
                                    the deleter (CAP-04, CAP-06); the harness frees */
  int deleter_calls;             /* calls of our deleter for this tensor */
  int bad_self;                  /* deleter got a pointer other than the exported struct */
  int destructor_deleted;        /* the capsule died unconsumed and its destructor called
                                    the deleter (CAP-05): the consumer never renamed it */
  uintptr_t base;                /* the buffer as materialised (the device block in the CUDA
                                    mode): aliasing is judged against it even after an early
                                    deleter call freed the buffer */
  void *device;                  /* the device block holding the buffer (devmem.h), or NULL;
                                    the deleter gives it back with the host buffer */
  int pending;                   /* the block's bytes were left pending on the producer's
                                    stream (dlc_devmem_upload): its __dlpack__ orders them */
} dlc_forged;

/* Materialises r, in device memory when the CUDA mode backs it (devmem.h); NULL when memory
 * ran out. */
dlc_forged *dlc_forged_new(const dlc_record *r);

/* The same with the record's plan already made (dlc_rec_plan with DLC_REC_BUFFER_CAP). */
dlc_forged *dlc_forged_new_plan(const dlc_record *r, const dlc_plan *plan);

/* A new capsule over f ("dltensor" or "dltensor_versioned", CAP-01, CAP-02; with the used_
 * prefix when the record asks for an already consumed capsule). */
PyObject *dlc_forged_capsule(dlc_forged *f);

/* 1 when capsule (one of dlc_forged_capsule's) still has its unconsumed name: no consumer
 * renamed it used_* (CAP-03). */
int dlc_forged_capsule_unconsumed(PyObject *capsule);

/* The exported DLTensor with shape and strides read from r, the record f was made from. The
 * first deleter call frees f's own arrays; r's live as long as the caller's record, so an
 * oracle that goes on after an early deleter call (a breach set aside) still reads them. */
DLTensor dlc_forged_tensor(const dlc_forged *f, const dlc_record *r);

/* 1 when the exported struct has a deleter (the record did not ask for NULL, OWN-01). */
int dlc_forged_has_deleter(const dlc_forged *f);

/* Frees f and whatever memory the deleter has not freed yet. */
void dlc_forged_free(dlc_forged *f);

#endif /* DLCONFORM_FUZZ_FORGE_H */
