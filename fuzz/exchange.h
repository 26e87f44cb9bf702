/* exchange: the consumer target's per-input Python plumbing, kept out of its instrumented
 * code (target_consumer.c, consumer_oracles.c): every coverage edge an input hits costs
 * libFuzzer bookkeeping, and branches that depend on what earlier inputs did (the memo
 * below) would make AFL++ see the same input take different edges. */
#ifndef DLCONFORM_FUZZ_EXCHANGE_H
#define DLCONFORM_FUZZ_EXCHANGE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "forge.h"
#include "producer.h"
#include "record.h"

/* One exchange:
 *   - a capsule over f;
 *   - a producer for it (producer.h): on r's device, old or strict when r's kw bits ask, of
 *     r's offer type (xapi_offer.h), with the tables' log reset;
 *   - the consumer's from_dlpack(producer[, copy=][, device=r's kw device]) as a vectorcall,
 *     with no argument tuple or keyword dict per input. copy: DLC_COPY_*, or -1 for none.
 * *result: the result, or NULL with the exception set (a refusal). *log: the producer's call
 * log. The producer is gone on return. Returns 0, or -1 when the capsule or producer could
 * not be made (nothing called, no exception set). */
int dlc_exchange(dlc_forged *f, const dlc_record *r, int copy, PyObject **result,
                 dlc_producer_log *log);

/* str() of a fetched exception (*type, *value, *tb) as a new reference, or NULL (no
 * exception left set). May normalise the triple in place (PyErr_NormalizeException); the
 * caller still owns all three. */
PyObject *dlc_exception_text(PyObject **type, PyObject **value, PyObject **tb);

/* dlc_oracle_fail(clause, "from_dlpack raised TYPE: TEXT") for a refusal of class type
 * with message text (NULL: "?"): aborts unless the lists set it aside. Set-aside ones are
 * remembered: dlc_oracle_fail's decision depends only on the clause and the message, so the
 * same (clause, type, text) is set aside again without formatting and normalising the
 * message per input. The memo compares without memcmp/strcmp (which libFuzzer intercepts
 * and records on every mismatch), and lives here, uninstrumented, so that a first and a
 * later sighting take the same edges (AFL++ stability). */
void dlc_refusal_fail(const char *clause, PyObject *type, PyObject *text);

#endif /* DLCONFORM_FUZZ_EXCHANGE_H */
