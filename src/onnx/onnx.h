/* onnx.h - ONNX ModelProto/TensorProto <-> IR, and external data. */
#ifndef ER_ONNX_H
#define ER_ONNX_H

#include "ir/ir.h"
#include "onnx/pb.h"

/* Parses the model bytes already held by `model` (model->map/map_size) into
 * model->graph, enforcing model->limits. */
er_status er__onnx_parse_model(struct er_model *model);

/* Parses one serialized TensorProto into a new tensor whose data is owned by
 * the tensor (never referencing `data`). `name_out` (may be NULL) receives a
 * malloc'd copy of the name or NULL. External data is refused. Used for test
 * data files and the CLI. */
er_status er__onnx_parse_tensor_file(const void *data, size_t size, er_tensor *tensor_out,
                                     char **name_out);

/* Serializes a tensor as a TensorProto (raw_data form) into `w`. */
er_status er__onnx_write_tensor(er_pbw *w, const er_tensor *t, const char *name);

/* ---- external data (extdata.c) ----------------------------------------- */

/* Reads `length` bytes (UINT64_MAX = to the end of the file) at `offset` of
 * the external file `location`, resolved inside the model's folder. The path
 * may not be absolute, contain "..", backslashes or NULs, or pass through a
 * symbolic link; the file must be a regular file with a single hard link.
 * On success *data_out is 64-byte aligned memory owned by the caller
 * (er__aligned_free) holding *length_out bytes. */
er_status er__extdata_read(const struct er_model *model, const char *location,
                           size_t location_len, uint64_t offset, uint64_t length,
                           void **data_out, uint64_t *length_out);

#endif /* ER_ONNX_H */
