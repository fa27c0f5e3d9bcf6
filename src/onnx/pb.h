/* pb.h - a bounded reader (and a small writer) for the protobuf wire format.
 *
 * The reader never reads past `end`, never trusts a length before comparing
 * it with the bytes that remain, and rejects varints longer than 10 bytes.
 * It does not recurse: unknown fields are skipped by length, so nesting of
 * unknown messages costs nothing. Callers that descend into known messages
 * track depth themselves against ER_LOAD max_nesting. */
#ifndef ER_PB_H
#define ER_PB_H

#include "core/core.h"

enum {
  ER_PB_VARINT = 0,
  ER_PB_FIXED64 = 1,
  ER_PB_LEN = 2,
  ER_PB_FIXED32 = 5,
};

typedef struct er_pb {
  const uint8_t *p;    /* next byte to read */
  const uint8_t *end;  /* one past the last byte of this message */
} er_pb;

typedef struct er_pb_field {
  uint32_t number;
  uint32_t wire;
  uint64_t value;       /* varint, fixed32 or fixed64 payload */
  const uint8_t *data;  /* ER_PB_LEN payload */
  size_t len;           /* ER_PB_LEN payload bytes */
} er_pb_field;

static inline er_pb er__pb_init(const void *data, size_t len) {
  er_pb pb = {(const uint8_t *)data, (const uint8_t *)data + len};
  return pb;
}

/* Reads the next field. Sets *done and returns OK at the end of the message.
 * Errors: TRUNCATED (a field runs past the end), MALFORMED (bad varint, field
 * number 0, group or unknown wire type). */
er_status er__pb_next(er_pb *pb, er_pb_field *f, bool *done);

/* Decodes one varint at *p (bounded by end), advancing *p. */
er_status er__pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);

/* Packed-or-unpacked repeated scalar helpers. A repeated scalar field may
 * arrive as several unpacked occurrences or as packed blocks, so callers
 * count first and then fill. */
typedef enum er_pb_scalar {
  ER_PB_S_VARINT,   /* int32, int64, uint64, bool, enum */
  ER_PB_S_FIXED32,  /* float */
  ER_PB_S_FIXED64,  /* double */
} er_pb_scalar;

/* Number of elements one occurrence `f` of a repeated scalar field holds
 * (1 when unpacked, the packed count when length-delimited). */
er_status er__pb_scalar_count(const er_pb_field *f, er_pb_scalar kind, uint64_t *count_out);
/* Appends the elements of occurrence `f` to out[*n..]; `cap` bounds out.
 * Values are stored as raw 64-bit patterns (varint value, or the fixed32 /
 * fixed64 bits zero-extended). */
er_status er__pb_scalar_read(const er_pb_field *f, er_pb_scalar kind, uint64_t *out,
                             uint64_t cap, uint64_t *n);

/* ---- writer (growable buffer) ------------------------------------------- */

typedef struct er_pbw {
  uint8_t *buf;
  size_t len, cap;
  bool failed;  /* set on allocation failure; later writes are ignored */
} er_pbw;

void er__pbw_varint(er_pbw *w, uint64_t v);
void er__pbw_tag(er_pbw *w, uint32_t number, uint32_t wire);
void er__pbw_bytes_field(er_pbw *w, uint32_t number, const void *data, size_t len);
void er__pbw_varint_field(er_pbw *w, uint32_t number, uint64_t v);
void er__pbw_raw(er_pbw *w, const void *data, size_t len);
void er__pbw_free(er_pbw *w);

#endif /* ER_PB_H */
