/* llm-quant.h - the LLM quantizer's internal parts: the importance matrix
 * measured on calibration text (llm-imatrix.c) and the quantization report
 * (llm-quant.c). The public entry is er_llm_quantize (edgerun.h). */
#ifndef ER_LLM_QUANT_H
#define ER_LLM_QUANT_H

#include "edgerun.h"

/* Per weight matrix, the mean square of each input column's activation
 * over the calibration tokens: how much a rounding error in that column of
 * the weights moves the product's output. Only the decoder blocks'
 * matrices ("blk.*") are measured, as llama.cpp's imatrix does. */
typedef struct er_llm_imatrix er_llm_imatrix;

typedef struct er_llm_imatrix_options {
  int64_t n_ctx;               /* tokens per calibration chunk; 0 = 512 */
  int64_t max_chunks;          /* 0 = the whole text */
  int threads;                 /* 0 = 1 */
  bool progress;               /* a progress bar on stderr when it is a terminal */
} er_llm_imatrix_options;

/* Activation ranges per site of the forward pass (llm-ranges.c): what
 * er_llm_analyze reports and quantize's fp16_safe scales by. */
typedef struct er_llm_ranges er_llm_ranges;

/* Runs the model over the text file in chunks of n_ctx tokens and collects
 * the importance matrix (im_out not NULL) and the activation ranges (rg_out
 * not NULL) in the same pass. Memory stays flat in the text length: the
 * file is read and tokenized a piece at a time (pieces end at a newline). */
er_status er__llm_calibrate(const er_llm *llm, const char *text_path, const er_llm_imatrix_options *opts,
                            er_llm_imatrix **im_out, er_llm_ranges **rg_out);
/* Reads an importance matrix in llama.cpp's GGUF format (llama-imatrix's
 * default output: "<tensor>.in_sum2" and "<tensor>.counts" per matrix). */
er_status er__llm_imatrix_read(const char *path, er_llm_imatrix **out);
/* Writes it in that format, so llama-quantize --imatrix reads it. */
er_status er__llm_imatrix_write(const er_llm_imatrix *im, const char *path);
void er__llm_imatrix_free(er_llm_imatrix *im);
/* The importance of each of `cols` columns of the named matrix, or NULL
 * when it was not measured (or was measured with another width). */
const float *er__llm_imatrix_find(const er_llm_imatrix *im, const char *tensor, int64_t cols);
/* Chunks and tokens the matrix was measured over. */
void er__llm_imatrix_stats(const er_llm_imatrix *im, int64_t *chunks, int64_t *tokens, size_t *entries);

/* ---- llm-ranges.c ---------------------------------------------------------- */

er_llm_ranges *er__llm_ranges_new(void);
void er__llm_ranges_free(er_llm_ranges *rg);
/* The observer's view (llm/llm-observe.h): the product's input and output
 * sites, or the residual stream (y NULL). */
void er__llm_ranges_observe(er_llm_ranges *rg, const char *weight, const float *x, int64_t n, int64_t cols,
                            const float *y, int64_t rows, int64_t ldy);
/* ER_STATUS_OK, or the allocation failure met inside the observer. */
er_status er__llm_ranges_status(const er_llm_ranges *rg);
void er__llm_ranges_set_counts(er_llm_ranges *rg, int64_t chunks, int64_t tokens);
size_t er__llm_ranges_count(const er_llm_ranges *rg);
const er_llm_act_range *er__llm_ranges_at(const er_llm_ranges *rg, size_t i);
/* The site's range, or NULL when it was not seen. */
const er_llm_act_range *er__llm_ranges_find(const er_llm_ranges *rg, const char *site);

#endif /* ER_LLM_QUANT_H */
