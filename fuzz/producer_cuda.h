/* producer_cuda: the producer target's CUDA mode (producer-NAME@cuda, DLCONFORM_FUZZ_DEVICE=cuda;
 * issue 21; fuzz/README.md, "The producer on a GPU").
 *
 * The view lies in CUDA memory on (kDLCUDA, 0) (dlconform.fuzz.producer_views, device="cuda"),
 * so __dlpack__'s stream, dl_device and copy keywords take their CUDA meaning. The record's
 * keywords map onto the CUDA cases:
 *   - stream: absent or None (the legacy default stream, STR-04); an int above 2 becomes the
 *     target's own non-blocking stream, a real handle (STR-07); -1, 1, 2 as they are (STR-03,
 *     STR-05, STR-06); 0 (STR-08) and ints below -1 (no stream, STR-02) as they are; a str;
 *   - dl_device: absent or (2, 0) the view's own device; (1, 0) the host copy (STR-12); another
 *     defined device with an id >= 0 (DEV-05); (1, id != 0) or an undefined type or a negative
 *     id, which name no device (bad arguments).
 * Invariants:
 *   - refusals: a stream the spec rules out (a str, 0, below -1), a stream with the host copy
 *     (STR-12: for kDLCPU it must be None) and a dl_device naming no device are bad arguments:
 *     any class but SystemError; the host copy with copy=False must be BufferError (CPY-05);
 *     another device, or the host copy, BufferError (DEV-05; TypeError: an old producer,
 *     VER-06); any other refusal one of the allowed classes. Refusing a valid stream is no
 *     finding (STR-13; the suites judge what must be accepted);
 *   - acceptance: a str stream fails STR-02 (its words make it an error); 0 and ints below -1
 *     warn (STR-08 says producers should refuse; no stream: unspecified); the host copy with
 *     copy=False fails CPY-05, with a stream warns (STR-12); a dl_device naming no device
 *     fails DEV-05 (ambiguous for a CPU id other than 0);
 *   - the export lies where it was asked: the view's device for no dl_device (DEV-03) or
 *     (2, 0) (DEV-05), (1, 0) for the host copy (STR-12), the asked one otherwise (DEV-05);
 *     a versioned host copy carries IS_COPIED (FLG-04);
 *   - the target's stream is alive after the export and its deleter (STR-11);
 *   - the values of a device export are read as a consumer on the stream it named reads them
 *     (a copy enqueued on it, then it synchronised); for -1 and the streams the spec rules out, after
 *     the whole device ran what it holds (devmem.h). A difference on the named stream that the
 *     read after the whole device does not show is that stream's clause (STR-04..07): the
 *     producer did not make it wait (STR-01). It shows where the tensor's data is still pending
 *     on its own stream: pyref's and ref's device arrays, and on the simulated runtime, which
 *     runs a stream's work only when something waits for it.
 * The Python twin is dlconform.fuzz.producer_cuda. */
#ifndef DLCONFORM_FUZZ_PRODUCER_CUDA_H
#define DLCONFORM_FUZZ_PRODUCER_CUDA_H

#include <dlpack/dlpack.h>

#include "record.h"

/* Where an accepted export's elements are to be read. */
enum { DLC_PCUDA_READ_NONE = 0, DLC_PCUDA_READ_HOST = 1, DLC_PCUDA_READ_DEVICE = 2 };

/* The rule a refused __dlpack__ is judged by (target_producer.c applies it). */
enum {
  DLC_PCUDA_REFUSE_ALLOWED = 0, /* one of the allowed classes (dlc_pyhost_exception_allowed) */
  DLC_PCUDA_REFUSE_ANY = 1,     /* a bad argument: any class but SystemError */
  DLC_PCUDA_REFUSE_DEVICE = 2,  /* BufferError or TypeError, else DEV-05 */
  DLC_PCUDA_REFUSE_COPY = 3     /* BufferError or TypeError, else CPY-05 */
};

/* Once, from the target's initialisation after pyhost: nothing when the mode is off. Else
 * binds the runtime (devmem.h, which binds ref's too) and makes the target's stream. Exits 2
 * with one line when the mode cannot run. */
void dlc_pcuda_init(const char *producer);

/* 1 when the mode is on. */
int dlc_pcuda_active(void);

/* The int __dlpack__ gets for the record's int stream v (see above). */
long long dlc_pcuda_stream(long long v);

/* The rule for a refusal of the record's __dlpack__ call. */
int dlc_pcuda_refusal_rule(const dlc_record *r);

/* The argument oracles of an accepted __dlpack__ call (STR-02, STR-08, CPY-05, STR-12, DEV-05). */
void dlc_pcuda_arguments(const dlc_record *r);

/* The device oracles on an accepted export t (versioned: its flags): on the device asked, else
 * `clause` when none was asked (DEV-03 for __dlpack__, XAPI-14 for the exchange API), DEV-05
 * or STR-12 when one was; IS_COPIED on a host copy (FLG-04). Returns where its elements are to
 * be read (DLC_PCUDA_READ_*). */
int dlc_pcuda_placed(const dlc_record *r, const DLTensor *t, int versioned, uint64_t flags, const char *clause);

/* The stream a consumer that passed the record's stream reads an export on (the handle the
 * runtime takes: 1 the legacy default stream for None, absent or 1, 2 the per-thread one, the
 * target's stream for an int above 2), or 0 when it named none to read on (-1, and the values
 * the spec rules out). */
uintptr_t dlc_pcuda_read_stream(const dlc_record *r);

/* The clause of that stream's meaning (STR-04 None or absent, STR-05 1, STR-06 2, STR-07 a
 * handle): a read there that misses the tensor's data breaks it, and STR-01. */
const char *dlc_pcuda_stream_clause(const dlc_record *r);

/* After the export was consumed: STR-11 when the record passed the target's stream (a new
 * one is made when it died). */
void dlc_pcuda_after(const dlc_record *r);

#endif /* DLCONFORM_FUZZ_PRODUCER_CUDA_H */
