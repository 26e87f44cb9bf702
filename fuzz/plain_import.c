/* plain_import: see plain_import.h. */
#include "plain_import.h"

#include "devmem.h"
#include "producer.h"
#include "pyhost.h"
#include "result_view.h"

PyObject *dlc_plain_call(const dlc_record *r, dlc_forged **f) {
  *f = dlc_forged_new(r);
  if (*f == NULL) return NULL;
  PyObject *capsule = dlc_forged_capsule(*f);
  PyObject *producer = capsule ? dlc_producer_new(capsule, r->device_type, r->device_id) : NULL;
  Py_XDECREF(capsule);
  if (producer != NULL && (*f)->device != NULL && (*f)->pending)
    dlc_producer_set_order(producer, dlc_devmem_order);
  PyObject *result = producer ? PyObject_CallOneArg(dlc_py.from_dlpack, producer) : NULL;
  Py_XDECREF(producer);
  PyErr_Clear();
  return result;
}

void dlc_plain_end(dlc_forged *f) {
  if (f == NULL) return;
  if (dlc_forged_has_deleter(f) && f->deleter_calls == 0) PyGC_Collect();
  if (f->deleter_calls == 0 && !f->used && dlc_forged_has_deleter(f)) return; /* kept: leak */
  dlc_forged_free(f);
}

static int memo[2] = {-1, -1};

static int plain_copies(int backed) {
  dlc_record r;
  dlc_rec_init(&r);
  r.ndim = 1;
  r.shape[0] = 16;
  (void)dlc_rec_row_major(&r);
  r.code = kDLUInt;
  r.bits = 8;
  r.fill_seed = 1;
  r.device_type = backed ? kDLCUDA : kDLCPU;
  dlc_forged *f;
  PyObject *result = dlc_plain_call(&r, &f);
  int copies = 0;
  if (result != NULL) {
    Py_buffer view;
    int have_view;
    uintptr_t a = (uintptr_t)dlc_result_address(result, &view, &have_view);
    copies = a != 0 && !(a >= f->base && a - f->base < f->mem.plan.size);
    if (have_view == 1) PyBuffer_Release(&view);
    Py_DECREF(result);
  }
  dlc_plain_end(f);
  return copies;
}

int dlc_plain_import_copies(int backed) {
  backed = backed != 0;
  if (memo[backed] < 0) memo[backed] = plain_copies(backed);
  return memo[backed];
}
