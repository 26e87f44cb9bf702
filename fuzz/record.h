/* record: the fuzz input format (format 2). Byte layout in fuzz/README.md.
 *
 * A record describes one forged DLPack export: DLTensor metadata, the capsule kind, the
 * DLManagedTensorVersioned version and flags, how data/shape/strides pointers are formed,
 * the keyword arguments to pass, and the C exchange API table the producer offers (byte 67;
 * format 1 kept that byte unused, so a format-1 input reads as "no offer" unless it carried
 * junk there). Invariants:
 *   - dlc_rec_decode accepts ANY byte string: missing bytes read as 0, extra bytes are
 *     ignored, no value is rejected (negative ndim, unknown codes, huge extents included).
 *   - dlc_rec_encode(decode(b)) equals b truncated or zero-extended to dlc_rec_size(); so
 *     decode is a bijection between records and canonical byte strings.
 *   - Shape and strides hold max(ndim, 0) entries each (ndim is an int8: at most 127).
 * Materialising a record into memory (sizing with check's extent arithmetic) lives in
 * layout.h. No Python here.
 */
#ifndef DLCONFORM_FUZZ_RECORD_H
#define DLCONFORM_FUZZ_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define DLC_REC_FORMAT 2        /* written by the encoder at byte 0 (2: byte 67 is the offer) */
#define DLC_REC_HEADER_SIZE 68  /* fixed part; shape then strides follow */
#define DLC_REC_MAX_NDIM 127    /* ndim is stored as int8 */
#define DLC_REC_MAX_SIZE (DLC_REC_HEADER_SIZE + 16 * DLC_REC_MAX_NDIM)

/* Byte 1, "kind": capsule kind and pointer shapes. */
#define DLC_REC_VERSIONED 0x01u     /* DLManagedTensorVersioned, "dltensor_versioned" (CAP-02) */
#define DLC_REC_STRIDES_NULL 0x02u  /* strides = NULL (LAY-06, LAY-07) */
#define DLC_REC_SHAPE_NULL 0x04u    /* shape = NULL (LAY-08, LAY-09) */
#define DLC_REC_DELETER_NULL 0x08u  /* deleter = NULL (OWN-01) */
#define DLC_REC_DATA_NULL 0x10u     /* data = NULL even when a buffer could be sized (LAY-04) */
#define DLC_REC_DANGLING 0x20u      /* unsizable/over-cap data: dangling PROT_NONE, not NULL */
#define DLC_REC_USED_NAME 0x40u     /* capsule already named "used_dltensor[_versioned]" (CAP-04) */

/* Byte 5, "kw": which keyword arguments are passed (absent: not passed at all). */
#define DLC_KW_MAX_VERSION 0x01u
#define DLC_KW_COPY 0x02u
#define DLC_KW_DL_DEVICE 0x04u
#define DLC_KW_STREAM 0x08u
#define DLC_KW_OLD_PRODUCER 0x10u /* the producer is an old one: __dlpack__ takes only stream,
                                     TypeError for other keywords (VER-06) */
#define DLC_KW_STRICT_PRODUCER 0x20u /* the producer raises BufferError for a dl_device other
                                       than its own (DEV-05), rather than ignoring it */
#define DLC_KW_SIDE_STREAM 0x40u /* consumer target, CUDA mode: from_dlpack runs inside a side
                                   stream context of the consumer's library, where dlconform
                                   knows one (devmem.h); ignored elsewhere */
#define DLC_KW_PASSED 0x0fu       /* the bits that pass a keyword */

/* Byte 67, "offer": the DLPackExchangeAPI the producer offers as __dlpack_c_exchange_api__
 * (XAPI-01, XAPI-02). Bits 0..2 the kind, bit 3 a variant, bits 4..7 kept. Every value
 * names an offer. A record with an offer exports a versioned tensor whatever kind bit 0
 * says: the table hands out DLManagedTensorVersioned only (XAPI-14), and the capsule path
 * must export the same tensor (dlc_rec_apply_offer). */
#define DLC_OFFER_KIND 0x07u
#define DLC_OFFER_MAJOR0 0x08u /* DLC_OFFER_MAJOR: the foreign header major is 0, not 2 */
enum {
  DLC_OFFER_NONE = 0,          /* no attribute (what format 1 always meant) */
  DLC_OFFER_TYPE = 1,          /* a 1.3 table on the producer's type */
  DLC_OFFER_INSTANCE = 2,      /* a 1.3 table on instances only, none on the type (XAPI-04) */
  DLC_OFFER_MAJOR = 3,         /* a type table whose header major is 2 (0 with bit 3) (XAPI-06) */
  DLC_OFFER_NULL_DLTENSOR = 4, /* a 1.3 type table, dltensor_from_py_object_no_sync NULL (XAPI-11) */
  DLC_OFFER_CHAINED = 5,       /* a major-2 type table whose prev_api is a 1.3 table (XAPI-06/07) */
  DLC_OFFER_SHADOWED = 6,      /* a 1.3 table on the type, another on the instance (XAPI-04) */
  DLC_OFFER_MINOR = 7,         /* a type table of version 1.99: a newer minor, same layout */
};

/* copy value (byte 64, taken mod 3) and stream kind (byte 65, taken mod 3). */
enum { DLC_COPY_NONE = 0, DLC_COPY_FALSE = 1, DLC_COPY_TRUE = 2 };
enum { DLC_STREAM_NONE = 0, DLC_STREAM_INT = 1, DLC_STREAM_STR = 2 };

typedef struct {
  uint8_t format;     /* byte 0 as read; decode interprets every value with layout 2 */
  uint8_t kind;       /* DLC_REC_* bits; bit 7 reserved and kept */
  int8_t ndim;        /* DLTensor.ndim, -128..127 */
  uint8_t code;       /* DLDataType.code */
  uint8_t bits;       /* DLDataType.bits */
  uint8_t kw;         /* DLC_KW_* bits; bit 7 reserved and kept */
  uint16_t lanes;     /* DLDataType.lanes */
  int32_t device_type;
  int32_t device_id;
  uint32_t version_major; /* DLManagedTensorVersioned.version (ignored for legacy) */
  uint32_t version_minor;
  uint64_t flags;         /* DLManagedTensorVersioned.flags (ignored for legacy) */
  uint64_t byte_offset;
  int32_t kw_max_major;   /* max_version=(major, minor) */
  int32_t kw_max_minor;
  int32_t kw_dev_type;    /* dl_device=(type, id); the consumer target passes device= */
  int32_t kw_dev_id;
  int64_t kw_stream;      /* stream value when stream kind is int */
  uint8_t kw_copy;        /* DLC_COPY_* after mod 3 is applied by users; stored raw */
  uint8_t kw_stream_kind; /* DLC_STREAM_* after mod 3; stored raw */
  uint8_t fill_seed;      /* buffer byte i = (uint8_t)(i * 131 + fill_seed) */
  uint8_t offer;          /* byte 67: DLC_OFFER_* kind in bits 0..2, DLC_OFFER_MAJOR0; rest kept */
  int64_t shape[DLC_REC_MAX_NDIM];   /* entries beyond max(ndim,0) are 0 */
  int64_t strides[DLC_REC_MAX_NDIM]; /* in elements (LAY-05); kept even when STRIDES_NULL */
} dlc_record;

/* Number of shape (and of strides) entries a record carries: max(ndim, 0). */
int dlc_rec_dims(const dlc_record *r);

/* Encoded size of r: DLC_REC_HEADER_SIZE + 16 * dlc_rec_dims(r). */
size_t dlc_rec_size(const dlc_record *r);

/* Decodes any byte string (data may be NULL when size is 0). Never fails. */
void dlc_rec_decode(const uint8_t *data, size_t size, dlc_record *out);

/* Encodes r into out (capacity cap). Returns the full encoded size; when that exceeds
 * cap only the first cap bytes are written (the tail decodes as zeros). */
size_t dlc_rec_encode(const dlc_record *r, uint8_t *out, size_t cap);

/* The offer kind of r: r->offer & DLC_OFFER_KIND (DLC_OFFER_*). */
int dlc_rec_offer(const dlc_record *r);

/* Applies the offer's rule to a decoded record before it is exported: with an offer, kind
 * bit 0 is set (versioned). Records without an offer are left as they are. */
void dlc_rec_apply_offer(dlc_record *r);

/* A zeroed record with format 2, dtype float32 (2, 32, 1), device (1, 0), version (1, 3):
 * the defaults seeds and tests start from. */
void dlc_rec_init(dlc_record *r);

#endif /* DLCONFORM_FUZZ_RECORD_H */
