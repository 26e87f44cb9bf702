/* plain_import: the consumer's import of an export from a plain producer (no keyword), for the
 * consumer target's control imports, and whether the consumer copies even a plain export
 * (SEM-01's ambiguous case).
 *
 * SEM-01 asks for a view "whenever it can", and the array API for reuse "if possible": a
 * library whose arrays own their memory (a kernel library that copies every import into its
 * own buffers) cannot view, and from outside that is not told apart from one that chose to
 * copy. So a copy of a viewable export is a breach when the consumer views a plain export,
 * and ambiguous (a warn) when even that import copies, as the suite's attempts.copy_breach
 * grades it. The plain export: uint8[16], row-major, a legacy capsule, on the CPU or (backed)
 * on (kDLCUDA, 0) in device memory (devmem.h).
 * Plumbing, left uninstrumented (coverage.ignore): the memo below takes the same edges on a
 * first and a later call. The Python twin is dlconform.fuzz.consumer_oracles (_plain_call,
 * _plain_end, plain_import_copies). */
#ifndef DLCONFORM_FUZZ_PLAIN_IMPORT_H
#define DLCONFORM_FUZZ_PLAIN_IMPORT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "forge.h"
#include "record.h"

/* The consumer's from_dlpack of r's export from a plain producer, no keyword: a new reference
 * to the result, or NULL for a refusal (no exception left set). *f: the export (NULL when it
 * could not be made), to pass to dlc_plain_end once the result is dropped. */
PyObject *dlc_plain_call(const dlc_record *r, dlc_forged **f);

/* Collects, then frees f, unless the consumer kept the export (its deleter not run yet): its
 * memory is leaked then rather than freed under it. NULL is a no-op. */
void dlc_plain_end(dlc_forged *f);

/* 1 when the consumer's import of the plain export is a copy (its result has an address
 * outside the export's buffer); 0 when it views it, refuses it or shows no address. Once per
 * kind for the process: a consumer's design does not change between inputs. */
int dlc_plain_import_copies(int backed);

#endif /* DLCONFORM_FUZZ_PLAIN_IMPORT_H */
