/* pb.c - bounded protobuf wire-format reader and a minimal writer. */
#include "onnx/pb.h"

#include <stdlib.h>

er_status er__pb_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
  const uint8_t *p = *pp;
  uint64_t v = 0;
  for (int i = 0; i < 10; i++) {
    if (p >= end) return er__error(ER_STATUS_TRUNCATED, "varint runs past the end of the data");
    uint8_t b = *p++;
    /* The tenth byte may only contribute the top bit of a 64-bit value. */
    if (i == 9 && (b & 0xfe))
      return er__error(ER_STATUS_MALFORMED, "varint overflows 64 bits");
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *pp = p;
      *out = v;
      return ER_STATUS_OK;
    }
  }
  return er__error(ER_STATUS_MALFORMED, "varint longer than 10 bytes");
}

er_status er__pb_next(er_pb *pb, er_pb_field *f, bool *done) {
  uint64_t key;
  if (pb->p >= pb->end) {
    *done = true;
    return ER_STATUS_OK;
  }
  *done = false;
  ER_CHECK(er__pb_varint(&pb->p, pb->end, &key));
  uint64_t number = key >> 3;
  f->wire = (uint32_t)(key & 7);
  if (number == 0 || number > 536870911u)
    return er__error(ER_STATUS_MALFORMED, "field number %llu is outside 1..2^29-1",
                     (unsigned long long)number);
  f->number = (uint32_t)number;
  f->data = NULL;
  f->len = 0;
  f->value = 0;
  size_t left = (size_t)(pb->end - pb->p);
  switch (f->wire) {
    case ER_PB_VARINT: return er__pb_varint(&pb->p, pb->end, &f->value);
    case ER_PB_FIXED64:
      if (left < 8)
        return er__error(ER_STATUS_TRUNCATED, "field %u: fixed64 needs 8 bytes, %zu left",
                         f->number, left);
      memcpy(&f->value, pb->p, 8);
      pb->p += 8;
      return ER_STATUS_OK;
    case ER_PB_FIXED32: {
      uint32_t v;
      if (left < 4)
        return er__error(ER_STATUS_TRUNCATED, "field %u: fixed32 needs 4 bytes, %zu left",
                         f->number, left);
      memcpy(&v, pb->p, 4);
      f->value = v;
      pb->p += 4;
      return ER_STATUS_OK;
    }
    case ER_PB_LEN: {
      uint64_t len;
      ER_CHECK(er__pb_varint(&pb->p, pb->end, &len));
      left = (size_t)(pb->end - pb->p);
      if (len > left)
        return er__error(ER_STATUS_TRUNCATED,
                         "field %u declares %llu bytes but only %zu remain", f->number,
                         (unsigned long long)len, left);
      f->data = pb->p;
      f->len = (size_t)len;
      pb->p += len;
      return ER_STATUS_OK;
    }
    default:
      return er__error(ER_STATUS_MALFORMED, "field %u has unsupported wire type %u", f->number,
                       f->wire);
  }
}

er_status er__pb_scalar_count(const er_pb_field *f, er_pb_scalar kind, uint64_t *count_out) {
  if (f->wire != ER_PB_LEN) {
    uint32_t want = kind == ER_PB_S_VARINT    ? ER_PB_VARINT
                    : kind == ER_PB_S_FIXED32 ? ER_PB_FIXED32
                                              : ER_PB_FIXED64;
    if (f->wire != want)
      return er__error(ER_STATUS_MALFORMED, "field %u has wire type %u, expected %u", f->number,
                       f->wire, want);
    *count_out = 1;
    return ER_STATUS_OK;
  }
  if (kind == ER_PB_S_FIXED32) {
    if (f->len % 4)
      return er__error(ER_STATUS_MALFORMED, "packed field %u: %zu bytes is not a multiple of 4",
                       f->number, f->len);
    *count_out = f->len / 4;
    return ER_STATUS_OK;
  }
  if (kind == ER_PB_S_FIXED64) {
    if (f->len % 8)
      return er__error(ER_STATUS_MALFORMED, "packed field %u: %zu bytes is not a multiple of 8",
                       f->number, f->len);
    *count_out = f->len / 8;
    return ER_STATUS_OK;
  }
  /* Varints end at bytes without the continuation bit; a packed block must
   * end on one. */
  uint64_t n = 0;
  for (size_t i = 0; i < f->len; i++)
    if (!(f->data[i] & 0x80)) n++;
  if (f->len && (f->data[f->len - 1] & 0x80))
    return er__error(ER_STATUS_TRUNCATED, "packed field %u ends inside a varint", f->number);
  *count_out = n;
  return ER_STATUS_OK;
}

er_status er__pb_scalar_read(const er_pb_field *f, er_pb_scalar kind, uint64_t *out, uint64_t cap,
                             uint64_t *n) {
  if (f->wire != ER_PB_LEN) {
    if (*n >= cap) return er__error(ER_STATUS_INTERNAL, "repeated field %u overflows its count", f->number);
    out[(*n)++] = f->value;
    return ER_STATUS_OK;
  }
  const uint8_t *p = f->data, *end = f->data + f->len;
  while (p < end) {
    uint64_t v;
    if (*n >= cap) return er__error(ER_STATUS_INTERNAL, "repeated field %u overflows its count", f->number);
    if (kind == ER_PB_S_VARINT) {
      ER_CHECK(er__pb_varint(&p, end, &v));
    } else if (kind == ER_PB_S_FIXED32) {
      uint32_t w;
      memcpy(&w, p, 4);
      v = w;
      p += 4;
    } else {
      memcpy(&v, p, 8);
      p += 8;
    }
    out[(*n)++] = v;
  }
  return ER_STATUS_OK;
}

/* ---- writer ------------------------------------------------------------ */

static void pbw_reserve(er_pbw *w, size_t extra) {
  if (w->failed) return;
  if (w->len + extra <= w->cap) return;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < w->len + extra) {
    if (cap > SIZE_MAX / 2) {
      w->failed = true;
      return;
    }
    cap *= 2;
  }
  uint8_t *nb = realloc(w->buf, cap);
  if (!nb) {
    w->failed = true;
    return;
  }
  w->buf = nb;
  w->cap = cap;
}

void er__pbw_raw(er_pbw *w, const void *data, size_t len) {
  pbw_reserve(w, len);
  if (w->failed) return;
  if (len) memcpy(w->buf + w->len, data, len);
  w->len += len;
}

void er__pbw_varint(er_pbw *w, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    tmp[n++] = b | (v ? 0x80 : 0);
  } while (v);
  er__pbw_raw(w, tmp, n);
}

void er__pbw_tag(er_pbw *w, uint32_t number, uint32_t wire) {
  er__pbw_varint(w, ((uint64_t)number << 3) | wire);
}

void er__pbw_bytes_field(er_pbw *w, uint32_t number, const void *data, size_t len) {
  er__pbw_tag(w, number, ER_PB_LEN);
  er__pbw_varint(w, len);
  er__pbw_raw(w, data, len);
}

void er__pbw_varint_field(er_pbw *w, uint32_t number, uint64_t v) {
  er__pbw_tag(w, number, ER_PB_VARINT);
  er__pbw_varint(w, v);
}

void er__pbw_free(er_pbw *w) {
  free(w->buf);
  w->buf = NULL;
  w->len = w->cap = 0;
}
