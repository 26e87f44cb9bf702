/* plain_import: whether the consumer copies even a plain export (SEM-01's ambiguous case).
 *
 * SEM-01 asks for a view "whenever it can", and the array API for reuse "if possible": a
 * library whose arrays own their memory (a kernel library that copies every import into its
 * own buffers) cannot view, and from outside that is not told apart from one that chose to
 * copy. So a copy of a viewable export is a breach when the consumer views a plain export,
 * and ambiguous (a warn) when even that import copies, as the suite's attempts.copy_breach
 * grades it. The plain export: uint8[16], row-major, a legacy capsule, no keyword, on the CPU
 * or (backed) on (kDLCUDA, 0) in device memory (devmem.h).
 * Memoised per kind for the process (a consumer's design does not change between inputs) and
 * left uninstrumented (coverage.ignore): a first and a later call take the same edges. The
 * Python twin is dlconform.fuzz.consumer_oracles.plain_import_copies. */
#ifndef DLCONFORM_FUZZ_PLAIN_IMPORT_H
#define DLCONFORM_FUZZ_PLAIN_IMPORT_H

/* 1 when the consumer's import of the plain export is a copy (its result has an address
 * outside the export's buffer); 0 when it views it, refuses it or shows no address. Leaves
 * no exception set. */
int dlc_plain_import_copies(int backed);

#endif /* DLCONFORM_FUZZ_PLAIN_IMPORT_H */
