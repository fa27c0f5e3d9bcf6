/* dataset.h - samples for calibration, analysis and evaluation, read from
 * files one batch at a time so memory stays bounded however large the set.
 *
 * A DATA path is one of:
 *  - a .npy or .pb file (single-input models): its leading axis holds the
 *    samples (a tensor of the input's rank), or it is one sample (one rank
 *    less);
 *  - a folder of .npy / .pb files: for a single-input model every file
 *    holds samples for that input (in name order); for several inputs each
 *    file is named after its input ("<input>.npy", with '/' and ':' in the
 *    name written as '_') or is a .pb whose TensorProto name is the input's,
 *    and all of them hold the same number of samples;
 *  - a folder of sample folders (ONNX test-data layout: test_data_set_N folders with
 *    input_K.pb, or any sub-folders with per-input files as above), one
 *    sample set per sub-folder; an ONNX test folder (model.onnx beside
 *    test_data_set_*) is read the same way;
 *  - a folder of PNG / JPEG images (single image input), decoded and
 *    preprocessed as er_qdata_options declares.
 * .npy files are memory-mapped and sliced, never read whole; float64 data is
 * converted to the model's float32 input. */
#ifndef ER_QUANT_DATASET_H
#define ER_QUANT_DATASET_H

#include "edgerun-quant.h"

#include "core/tensor.h"
#include "ir/ir.h"

/* The most model inputs a data set can feed. */
#define ER_QDATA_MAX_INPUTS 64
/* The most files or sample folders one data folder may list. */
#define ER_QDATA_MAX_FILES 1000000

size_t er__qdata_input_count(const er_qdata *d);

/* The next batch: inputs[i] for every model input, tensors owned by the
 * data set and valid until the next call; *n_samples gets the samples in
 * the batch (0 at the end). */
er_status er__qdata_next(er_qdata *d, er_named_tensor *inputs, int64_t *n_samples);
/* Starts again from the first sample. */
void er__qdata_rewind(er_qdata *d);

/* ---- images (image.c) ------------------------------------------------- */

/* Decodes a PNG or JPEG file (chosen by content) into 8-bit pixels:
 * *pixels_out [h, w, c] row-major with c = 1 or 3, owned by the caller
 * (free()). Images larger than ER_IMAGE_MAX_PIXELS are refused. */
#define ER_IMAGE_MAX_PIXELS (UINT64_C(1) << 28)
er_status er__image_decode(const char *path, uint8_t **pixels_out, int *h_out, int *w_out,
                           int *c_out);
/* Resizes (bilinear, half-pixel centres), converts channels and layout, and
 * normalizes one decoded image into `dst` (float32, [C,H,W] or [H,W,C] per
 * prep, prep's height/width/channels all set). */
void er__image_prepare(const uint8_t *pixels, int h, int w, int c, const er_image_prep *prep,
                       float *dst);

#endif /* ER_QUANT_DATASET_H */
