/* producer: the tiny Python object a consumer's from_dlpack receives.
 * __dlpack__(**kw) returns the capsule it was built with (a new reference each call) and
 * logs how it was called; __dlpack_device__() returns the device tuple (API-01, API-02).
 * It never copies and ignores dl_device: what it hands out is always the forged capsule.
 * The log feeds the consumer-side keyword oracles (consumer_oracles.h):
 *   - the first stream breach, judged against the producer's device and the call's
 *     dl_device: STR-10 (CPU: only None), STR-12 (dl_device=(1, 0): only None), STR-08
 *     (CUDA: never 0), STR-09 (ROCm: never 1 or 2), STR-14 (CUDA: stream=None, or no stream,
 *     whose default is None: SHOULD be explicit);
 *   - whether some call asked for dl_device=(kDLCPU, 0) without copy=False (CPY-07);
 *   - whether any call asked for dl_device=(kDLCPU, 0) (DEV-06);
 *   - the copy value forwarded by the first call that carried one (CPY-06, CPY-07);
 *   - max_version[0] of the last call (VER-02);
 *   - the last call's stream where it was an int (-1: the consumer then orders its reads,
 *     STR-01), and whether it asked for a host copy;
 *   - for an old producer (VER-06), the calls refused with TypeError for new keywords.
 * Besides the plain type, xapi_offer.c makes one type per exchange-API offer with
 * dlc_producer_type_new (the attribute __dlpack_c_exchange_api__ is per type, XAPI-01);
 * all share these methods and this layout. */
#ifndef DLCONFORM_FUZZ_PRODUCER_H
#define DLCONFORM_FUZZ_PRODUCER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { DLC_FWD_ABSENT = -1, DLC_FWD_NONE = 0, DLC_FWD_FALSE = 1, DLC_FWD_TRUE = 2 };

typedef struct {
  int calls;              /* __dlpack__ calls */
  int refused_kw;         /* old producer: calls refused for a keyword other than stream */
  long max_major;         /* max_version[0] of the last call, -1 when not passed */
  const char *stream_clause; /* first stream breach, or NULL */
  char stream_msg[120];
  int cpu_dl_device;      /* some call passed dl_device=(1, 0) */
  int copy_forwarded;     /* DLC_FWD_*: copy= of the first call that passed it */
  int cpu_ask_unguarded;  /* some call passed dl_device=(1, 0) without copy=False: the
                             producer may copy (CPY-07 when the consumer was told copy=False) */
  int named_int;          /* the last call passed an int stream (not a bool), held in named
                             (-1: no synchronisation, STR-03) */
  long long named;
  int named_host;         /* the last call asked for dl_device=(kDLCPU, 0) */
  uintptr_t side;         /* set by dlc_exchange: the stream current inside the side-stream
                             context the call ran in (DLC_KW_SIDE_STREAM), 0 for none */
  int unrenamed;          /* set by dlc_exchange: __dlpack__ handed out the capsule and it
                             still has its unconsumed name after from_dlpack (CAP-03) */
} dlc_producer_log;

/* What a producer over pending device memory does per __dlpack__ call (devmem.h's
 * dlc_devmem_order): order the named stream after its data, or synchronise for a host copy. */
typedef void (*dlc_producer_order)(PyObject *stream, int host_copy);

/* Creates the type once (after Py_Initialize). Returns 0, or -1 with an exception set. */
int dlc_producer_type_init(void);

/* A new producer type with the plain type's methods, named name (a static string, as
 * "module.Name"); getattro NULL for the generic lookup. NULL with an exception set. */
PyTypeObject *dlc_producer_type_new(const char *name, getattrofunc getattro);

/* dlc_producer_new for a producer of type (from dlc_producer_type_new; NULL: the plain
 * type). */
PyObject *dlc_producer_new_of(PyTypeObject *type, PyObject *capsule, int device_type,
                              int device_id);

/* The capsule a producer hands out (borrowed), or NULL (no exception set) when obj is not
 * an instance of a producer type. */
PyObject *dlc_producer_capsule(PyObject *obj);

/* A new producer holding a reference to capsule and to a (device_type, device_id) tuple. */
PyObject *dlc_producer_new(PyObject *capsule, int device_type, int device_id);

/* Makes the producer an old one (VER-06): __dlpack__ raises TypeError for any keyword but
 * stream. */
void dlc_producer_set_old(PyObject *producer);

/* The producer's call log (valid while the producer lives). */
const dlc_producer_log *dlc_producer_log_of(PyObject *producer);

/* Gives the producer data pending on its stream: each __dlpack__ call that hands out the
 * capsule first calls order with the call's stream (NULL when none was passed) and whether it
 * asked dl_device=(kDLCPU, 0). */
void dlc_producer_set_order(PyObject *producer, dlc_producer_order order);

/* Makes __dlpack__ raise BufferError for a dl_device other than its own device (DEV-05),
 * instead of handing out the capsule anyway. */
void dlc_producer_set_strict(PyObject *producer);

#endif /* DLCONFORM_FUZZ_PRODUCER_H */
