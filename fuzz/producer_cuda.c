/* producer_cuda: see producer_cuda.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "producer_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "devmem.h"
#include "oracle.h"

/* the target's own stream, a consumer's (STR-07, STR-11); 0 while the mode is off */
static uintptr_t own_stream;

/* The stream cases of the record, after dlc_pcuda_stream. */
enum { S_NONE, S_VALID, S_ZERO, S_BELOW, S_STR };
/* The dl_device cases: the view's device, the host copy, another device, (kDLCPU, id != 0),
 * and a pair that names no device (an undefined type, a negative id). */
enum { D_SAME, D_HOST, D_FOREIGN, D_CPU_ID, D_NONE_NAMED };

void dlc_pcuda_init(const char *producer) {
  PyObject *entry = dlc_devmem_init(producer); /* exits 2 when the mode cannot run */
  Py_XDECREF(entry);                           /* a consumer's import: not used here */
  if (!dlc_devmem_active()) return;
  own_stream = dlc_devmem_stream_new();
  if (own_stream == 0) {
    fprintf(stderr, "dlconform-fuzz: the CUDA runtime made no stream for the producer target\n");
    exit(2);
  }
}

int dlc_pcuda_active(void) { return own_stream != 0; }

long long dlc_pcuda_stream(long long v) { return v > 2 ? (long long)own_stream : v; }

static int stream_case(const dlc_record *r) {
  if (!(r->kw & DLC_KW_STREAM) || r->kw_stream_kind % 3 == DLC_STREAM_NONE) return S_NONE;
  if (r->kw_stream_kind % 3 == DLC_STREAM_STR) return S_STR;
  return r->kw_stream == 0 ? S_ZERO : r->kw_stream < -1 ? S_BELOW : S_VALID;
}

static int device_case(const dlc_record *r) {
  if (!(r->kw & DLC_KW_DL_DEVICE)) return D_SAME;
  int32_t type = r->kw_dev_type, id = r->kw_dev_id;
  if (id < 0 || !dlc_is_known_device(type, 1, 3)) return D_NONE_NAMED;
  if (type == kDLCUDA && id == 0) return D_SAME;
  if (type == kDLCPU) return id == 0 ? D_HOST : D_CPU_ID;
  return D_FOREIGN;
}

static int copy_false(const dlc_record *r) {
  return (r->kw & DLC_KW_COPY) && r->kw_copy % 3 == DLC_COPY_FALSE;
}

int dlc_pcuda_refusal_rule(const dlc_record *r) {
  int s = stream_case(r), d = device_case(r);
  if (s == S_STR || s == S_ZERO || s == S_BELOW || d == D_NONE_NAMED || d == D_CPU_ID ||
      (d == D_HOST && s != S_NONE))
    return DLC_PCUDA_REFUSE_ANY;
  if (d == D_HOST && copy_false(r)) return DLC_PCUDA_REFUSE_COPY;
  if (d == D_HOST || d == D_FOREIGN) return DLC_PCUDA_REFUSE_DEVICE;
  return DLC_PCUDA_REFUSE_ALLOWED;
}

void dlc_pcuda_arguments(const dlc_record *r) {
  int s = stream_case(r), d = device_case(r);
  if (s == S_STR)
    dlc_oracle_fail("STR-02", "__dlpack__ accepted stream='stream' for a CUDA tensor (a stream is an int)");
  else if (s == S_BELOW)
    dlc_oracle_fail("STR-02", "__dlpack__ accepted stream=<int below -1> for a CUDA tensor " DLC_INVALID_ARGUMENT
                    "it names no CUDA stream)");
  else if (s == S_ZERO)
    dlc_oracle_fail("STR-08", "__dlpack__ accepted stream=0 for a CUDA tensor " DLC_INVALID_ARGUMENT
                    "producers should refuse it as ambiguous)");
  if (d == D_HOST && copy_false(r))
    dlc_oracle_fail("CPY-05", "__dlpack__ exported dl_device=(1, 0) of a CUDA tensor with copy=False");
  if (d == D_HOST && s != S_NONE)
    dlc_oracle_fail("STR-12", "__dlpack__ accepted a stream other than None with dl_device=(1, 0) "
                    DLC_INVALID_ARGUMENT "for kDLCPU the stream must be None)");
  if (d == D_NONE_NAMED)
    dlc_oracle_fail("DEV-05", "__dlpack__ accepted dl_device=(%d, %d), which names no device", r->kw_dev_type,
                    r->kw_dev_id);
  if (d == D_CPU_ID)
    dlc_oracle_fail("DEV-05", "__dlpack__ accepted dl_device=(1, %d) for a CUDA tensor " DLC_AMBIGUOUS
                    "a CPU device id that is not zero)", r->kw_dev_id);
}

int dlc_pcuda_placed(const dlc_record *r, const DLTensor *t, int versioned, uint64_t flags, const char *clause) {
  int d = device_case(r);
  if (d == D_NONE_NAMED || d == D_CPU_ID) return DLC_PCUDA_READ_NONE; /* no device to expect */
  DLDevice want = d == D_SAME ? (DLDevice){kDLCUDA, 0}
                  : d == D_HOST ? (DLDevice){kDLCPU, 0}
                                : (DLDevice){(DLDeviceType)r->kw_dev_type, r->kw_dev_id};
  if (t->device.device_type != want.device_type || t->device.device_id != want.device_id) {
    if (d == D_HOST) clause = "STR-12";
    else if (r->kw & DLC_KW_DL_DEVICE) clause = "DEV-05";
    dlc_oracle_fail(clause, "the export of a CUDA tensor%s is on (%d, %d), not (%d, %d)",
                    (r->kw & DLC_KW_DL_DEVICE) ? " for the dl_device asked" : "", (int)t->device.device_type,
                    (int)t->device.device_id, (int)want.device_type, (int)want.device_id);
    return DLC_PCUDA_READ_NONE;
  }
  if (d == D_HOST && versioned && !(flags & DLPACK_FLAG_BITMASK_IS_COPIED))
    dlc_oracle_fail("FLG-04", "the host copy of dl_device=(1, 0) lacks IS_COPIED");
  return d == D_SAME ? DLC_PCUDA_READ_DEVICE : d == D_HOST ? DLC_PCUDA_READ_HOST : DLC_PCUDA_READ_NONE;
}

uintptr_t dlc_pcuda_read_stream(const dlc_record *r) {
  int s = stream_case(r);
  if (s == S_NONE) return 1;
  if (s != S_VALID || r->kw_stream == -1) return 0;
  return r->kw_stream > 2 ? own_stream : (uintptr_t)r->kw_stream;
}

const char *dlc_pcuda_stream_clause(const dlc_record *r) {
  if (stream_case(r) == S_NONE) return "STR-04";
  return r->kw_stream == 1 ? "STR-05" : r->kw_stream == 2 ? "STR-06" : "STR-07";
}

void dlc_pcuda_after(const dlc_record *r) {
  if (stream_case(r) != S_VALID || r->kw_stream <= 2) return;
  if (dlc_devmem_stream_alive(own_stream)) return;
  own_stream = dlc_devmem_stream_new(); /* the next input gets a live one */
  dlc_oracle_fail("STR-11", "the consumer's stream died in __dlpack__ or with its capsule");
}
