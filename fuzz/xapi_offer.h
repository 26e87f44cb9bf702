/* xapi_offer: the C exchange API tables the consumer target's producer offers (record byte
 * 67, DLC_OFFER_* in record.h), and the oracles on how a consumer uses them.
 *
 * The attribute __dlpack_c_exchange_api__ is per type (XAPI-01), so dlc_xapi_offer_init
 * makes one producer type per offer (producer.h, dlc_producer_type_new), once. Every table
 * is a static DLPackExchangeAPI that lives for the process (XAPI-05), behind one
 * "dlpack_exchange_api" capsule made at init (XAPI-02):
 *   TYPE, NULL_DLTENSOR, MINOR  a type attribute (1.3; 1.3 without
 *                               dltensor_from_py_object_no_sync; 1.99);
 *   INSTANCE                    no type attribute; instances answer the lookup (getattro);
 *   SHADOWED                    the TYPE table on the type, another 1.3 table on instances;
 *   MAJOR                       a type attribute with header major 2 (0 with DLC_OFFER_MAJOR0);
 *   CHAINED                     a type attribute with header major 2 whose prev_api is the
 *                               TYPE table's header (XAPI-07: older consumers may walk it).
 *
 * The functions work on any producer whose capsule is an unconsumed "dltensor_versioned"
 * (dlc_rec_apply_offer makes every offered export versioned):
 *   managed_tensor_from_py_object_no_sync  hands out the capsule's DLManagedTensorVersioned
 *       and renames the capsule used_dltensor_versioned: the caller is the one owner, and
 *       the forged deleter runs once on either path (OWN-03 holds). A consumed capsule (a
 *       second call, a used_* record): BufferError (XAPI-14). Not a producer: TypeError.
 *   dltensor_from_py_object_no_sync  fills the caller's DLTensor with the export's (the
 *       same memory and metadata, non-owning, XAPI-15); the capsule stays unconsumed, so
 *       its destructor runs the deleter when the producer dies.
 *   managed_tensor_to_py_object_no_sync  steals the tensor into a new producer of the TYPE
 *       offer's type whose capsule deletes it unless consumed (XAPI-17).
 *   managed_tensor_allocator  a row-major CPU tensor of the prototype's dtype and shape
 *       (data 256-byte aligned); SetError (when not NULL) exactly when it fails (XAPI-13).
 *   current_work_stream  0 with *out NULL (XAPI-16 for CPU; the default stream elsewhere).
 *
 * Oracles, from inside the call (dlc_oracle_fail; the call then goes on normally when the
 * clause is set aside):
 *   XAPI-04  a function of an instance's table (INSTANCE, or SHADOWED's instance table) is
 *            called: the consumer looked the attribute up on the instance, where the producer
 *            offers nothing (or not that table), instead of the type (SHOULD).
 *   XAPI-06  a function of a table whose header major is not DLPACK_MAJOR_VERSION (MAJOR, the
 *            head of CHAINED) is called: the major was not checked before use (MUST). Using
 *            CHAINED's prev_api table is fine.
 * A call of NULL_DLTENSOR's NULL pointer is caught by xapi_guard.h (XAPI-11). No oracle asks
 * a consumer to use a table: the table is optional for consumers, and __dlpack__ stays the
 * primary path (XAPI-20). */
#ifndef DLCONFORM_FUZZ_XAPI_OFFER_H
#define DLCONFORM_FUZZ_XAPI_OFFER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "record.h"

/* What the consumer did with the tables during the exchange in flight (or the last one). */
typedef struct {
  int offer;    /* the record's offer byte while an exchange is in flight, -1 otherwise */
  int calls;    /* calls of any table function */
  int handouts; /* managed_tensor_from_py_object_no_sync calls that handed the tensor out */
  int views;    /* dltensor_from_py_object_no_sync calls that filled a view */
} dlc_xapi_log;

/* Makes the tables' capsules and the offer types (after dlc_producer_type_init). Returns 0,
 * or -1 with an exception set. */
int dlc_xapi_offer_init(void);

/* The producer type for r's offer; NULL for DLC_OFFER_NONE (the plain type). */
PyTypeObject *dlc_xapi_offer_type(const dlc_record *r);

/* Brackets one consumer call: begin zeroes the log and records r's offer as in flight, end
 * clears the in-flight offer (the counts stay readable). */
void dlc_xapi_begin(const dlc_record *r);
void dlc_xapi_end(void);

/* The log (valid until the next dlc_xapi_begin). */
const dlc_xapi_log *dlc_xapi_log_now(void);

#endif /* DLCONFORM_FUZZ_XAPI_OFFER_H */
