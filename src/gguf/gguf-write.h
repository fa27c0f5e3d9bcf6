/* gguf-write.h - writing GGUF files (version 3): metadata copied from a
 * reader or set one by one, then tensors in order, through a temporary
 * file renamed into place at the end, so a failed or killed write never
 * leaves a partial model under the final name.
 *
 * Use: er__gguf_writer_open; any number of er__gguf_writer_kv_* and
 * er__gguf_writer_add_tensor (the tensor infos, in file order); then
 * er__gguf_writer_data once per tensor, in the same order; then
 * er__gguf_writer_commit (or er__gguf_writer_abort on any error). */
#ifndef ER_GGUF_WRITE_H
#define ER_GGUF_WRITE_H

#include "gguf/gguf.h"

typedef struct er_gguf_writer er_gguf_writer;

/* `path` is borrowed; the bytes go to "<path>.tmp-<pid>" until commit. */
er_status er__gguf_writer_open(const char *path, er_gguf_writer **out);
/* The same writer building the file's bytes in memory instead (an
 * importer's image of a model read from another format): finish with
 * er__gguf_writer_finish_memory, which hands over the image (free it with
 * er__aligned_free), or er__gguf_writer_abort. */
er_status er__gguf_writer_open_memory(er_gguf_writer **out);
er_status er__gguf_writer_finish_memory(er_gguf_writer *w, void **data_out, size_t *size_out);
/* Deletes the temporary file and frees the writer (NULL is a no-op). */
void er__gguf_writer_abort(er_gguf_writer *w);
/* Flushes, syncs and renames onto the final path; frees the writer (also
 * on failure, after removing the temporary file). */
er_status er__gguf_writer_commit(er_gguf_writer *w);

/* A metadata pair copied as it is in a reader's file (values copied). A
 * key already set is replaced, keeping its place. */
er_status er__gguf_writer_kv_copy(er_gguf_writer *w, const er_gguf_kv *kv);
er_status er__gguf_writer_kv_u32(er_gguf_writer *w, const char *key, uint32_t v);
er_status er__gguf_writer_kv_f32(er_gguf_writer *w, const char *key, float v);
er_status er__gguf_writer_kv_str(er_gguf_writer *w, const char *key, const char *v);
/* An array of n strings (borrowed, copied). */
er_status er__gguf_writer_kv_str_array(er_gguf_writer *w, const char *key, const char *const *v, size_t n);

/* Declares the next tensor: name (borrowed, copied), ggml dims (dims[0]
 * the row length), type. */
er_status er__gguf_writer_add_tensor(er_gguf_writer *w, const char *name, int n_dims, const int64_t *dims,
                                     uint32_t type);
/* The bytes of the next tensor (exactly its size: rows * er__qb-style row
 * bytes); the header is written before the first call. */
er_status er__gguf_writer_data(er_gguf_writer *w, const void *data, uint64_t nbytes);

#endif /* ER_GGUF_WRITE_H */
