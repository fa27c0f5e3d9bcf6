/* onnx-write.h - IR back to ONNX ModelProto bytes.
 *
 * The writer serializes what the IR holds: opset imports, metadata, the main
 * graph and every subgraph (nodes with their attributes, initializers, inputs,
 * outputs and declared value_info). Tensors are written as raw_data (int4 and
 * uint4 packed two to a byte, as ONNX stores them). Constants that no node,
 * subgraph or graph output reads are left out, so a graph edited in place
 * (nodes removed, weights replaced) is written without its dead weights.
 *
 * What the IR does not keep cannot be written back: doc strings of nodes and
 * graphs, TypeProto attributes (refused with UNSUPPORTED), model-local
 * functions, and the sparse form of sparse initializers (written dense). */
#ifndef ER_ONNX_WRITE_H
#define ER_ONNX_WRITE_H

#include "ir/ir.h"
#include "onnx/pb.h"

/* Appends the ModelProto bytes of `model` to `w`. */
er_status er__onnx_write_model(const struct er_model *model, er_pbw *w);

/* Writes the model to `path` through a temporary file in the same folder
 * that is renamed into place only once it is complete and flushed, so a
 * reader never sees a half-written model (and a failure leaves no file). */
er_status er__onnx_save_model(const struct er_model *model, const char *path);

/* Writes `size` bytes to `path` the same way (temporary file, fsync,
 * rename). */
er_status er__write_file_atomic(const char *path, const void *data, size_t size);

#endif /* ER_ONNX_WRITE_H */
