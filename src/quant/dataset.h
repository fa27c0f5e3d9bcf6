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

#include "core/tensor.h"
#include "ir/ir.h"

/* The most model inputs a data set can feed. */
#define ER_QDATA_MAX_INPUTS 64
/* The most files or sample folders one data folder may list. */
#define ER_QDATA_MAX_FILES 1000000

/* How images become input tensors. */
typedef struct er_image_prep {
  int height, width;        /* resize target; 0 = the input's declared H, W */
  bool nhwc;                /* layout: false = NCHW (default), true = NHWC */
  int channels;             /* 1 (gray), 3; 0 = the input's declared C */
  bool bgr;                 /* channel order BGR instead of RGB */
  float scale;              /* pixel (0..255) multiplier, default 1/255 */
  float mean[3], std[3];    /* per channel, after scale: (x - mean) / std */
} er_image_prep;

void er__image_prep_init(er_image_prep *p);
/* Parses a "--preprocess" text: comma-separated key=value items among
 * size=HxW, layout=nchw|nhwc, channels=rgb|bgr|gray, scale=F,
 * mean=F[:F:F], std=F[:F:F]. INVALID_ARGUMENT names a bad item. */
er_status er__image_prep_parse(er_image_prep *p, const char *text);

typedef struct er_qdata_options {
  int batch;                /* samples per run where the batch is free; 0 = 1 */
  int64_t limit;            /* stop after this many samples; 0 = all */
  int64_t skip;             /* skip this many samples first */
  er_image_prep image;
} er_qdata_options;

void er__qdata_options_init(er_qdata_options *o);

typedef struct er_qdata er_qdata;

/* Opens DATA for `model`'s inputs. `path`, `model` and `opts` are borrowed
 * (the model must outlive the data set). */
er_status er__qdata_open(const char *path, const er_model *model, const er_qdata_options *opts,
                         er_qdata **out);
void er__qdata_free(er_qdata *d);

/* Samples in the set (after skip and limit). */
int64_t er__qdata_samples(const er_qdata *d);
size_t er__qdata_input_count(const er_qdata *d);

/* The next batch: inputs[i] for every model input, tensors owned by the
 * data set and valid until the next call; *n_samples gets the samples in
 * the batch (0 at the end). */
er_status er__qdata_next(er_qdata *d, er_named_tensor *inputs, int64_t *n_samples);
/* Starts again from the first sample. */
void er__qdata_rewind(er_qdata *d);

/* Reads labels: a .npy of integers (any shape; flattened) or a text file
 * with one integer per line. *labels_out is owned by the caller (free()). */
er_status er__qdata_read_labels(const char *path, int64_t **labels_out, int64_t *n_out);

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
