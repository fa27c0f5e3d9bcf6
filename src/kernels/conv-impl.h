/* conv-impl.h - what the files of the "conv" kernel group share (conv.c:
 * convolution as GEMM, depthwise and the kernel table; conv-direct.c:
 * direct convolution of small dense layers; conv-wino.c: Winograd;
 * convtranspose.c: ConvTranspose): the geometry and the helpers more than
 * one uses. */
#ifndef ER_KERNELS_CONV_IMPL_H
#define ER_KERNELS_CONV_IMPL_H

#include <stdatomic.h>

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/sgemm.h"
#include "kernels/vec.h"
#include "kernels/window.h"

typedef struct conv_state {
  const er_sgemm_isa *isa;
  const er_vec_ops *ops;
  er_activation act;
  /* Pixel-major: the GEMM is Y^T[OH*OW, Mg] = X'^T W^T, stored
   * transposed. Chosen at compile time when the output has few pixels
   * (7x7, 14x14) and many channels: its tiles then cover the pixels
   * exactly (any row count) and the channels in whole 32-wide panels,
   * where the channel-major form would pad 49 pixels to 64. */
  bool pixel_major;
  float *packed_w;    /* per group, group g at packed_w + g * gstride: as
                         A [Mg, Kg] (channel-major) or B [Kg, Mg] (pixel-major) */
  size_t gstride;     /* floats */
  /* Output size unknown at compile time (symbolic dims, subgraph bodies)
   * and the weights small: both packings are kept and each run takes the
   * one its pixel count wants (Silero VAD's 1-D convolutions over 4
   * positions would otherwise fill 4 of 32 columns per panel). */
  bool decide_at_run;
  float *packed_pm;   /* the pixel-major packing when decide_at_run */
  size_t gstride_pm;
  /* Output size unknown at compile time and a layer the direct kernel
   * takes (few channels, short patches, stride 1): its state, for the run
   * sizes it fits (er__kconv_cd_fits; YOLOv8n's 16-channel layers at 80x80). */
  void *cd;
  /* Batch folded into the columns: one GEMM W[M, K] x P[K, N*OH*OW] for
   * all images (conv_fold), chosen when images have fewer pixels than a
   * panel holds. Needs the channel-major packing. */
  bool fold;
  int64_t m, kg, group;
  int slots;
} conv_state;

/* Stride-1 convolutions with few output channels (at most CD_MAX_M, in
 * whole or nearly whole blocks of 8) and short patches (Cin x kh x kw at
 * most CD_MAX_K) over rows that fill the vectors: MNIST-style CNNs and the
 * tails of small detectors. Each image is copied once into a zero-padded
 * buffer, then blocks of 8 channels x rows x one vector of columns take
 * every tap as one input vector times 8 broadcast weights (vec-impl.h):
 * no patch matrix, no GEMM tiles of mostly padding. MNIST-8's 8->16 5x5
 * layer on 14x14 went from 34 us (GEMM, patches packed per block) to the
 * figure in the commit that added this. */
#define CD_MAX_M 32

#define CD_MAX_K 1024

typedef struct cd_state {
  const er_vec_ops *ops;
  er_activation act;
  float *wp;          /* [ceil(m / 8)][k][8] */
  int64_t m, k;
} cd_state;

typedef struct convt_state {
  const er_sgemm_isa *isa;
  float *packed;      /* per group: W_g^T [Mg * kh * kw, Cg], gstride floats apart */
  size_t gstride;
  int64_t c, mg, kh, kw, group;
  int slots;
} convt_state;

/* What both kernels accept: float32 tensors of rank 3 or 4 with
 * attributes the window code reads. */
bool er__kconv_conv_common_ok(const er_kernel_info *ki, bool fused);

er_activation er__kconv_node_act(const er_kctx *ctx);

/* Packs the weights [group][mg][kg] for s->pixel_major into s->packed_w. */
bool er__kconv_conv_pack_weights(conv_state *s, const er_sgemm_isa *isa, const float *w, int64_t group, int64_t mg,
                              int64_t kg);

er_status er__kconv_conv_gemm_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops,
                                   void **state_out, size_t *scratch_out);

void er__kconv_conv_gemm_release(void *state);

er_status er__kconv_conv_gemm_run(const er_kernel_run *kr);

/* Whether the direct kernel takes this geometry: stride 1, a window of
 * at least two taps, few channels in nearly whole blocks of 8, short
 * patches, rows that fill the vectors, and a padded image that fits. */
bool er__kconv_cd_fits(const er_window *g, const er_vec_ops *ops);

/* One group, every stride and dilation 1 (absent attributes are 1). */
bool er__kconv_dense_unit_steps(const er_kernel_info *ki);

bool er__kconv_cd_supports(const er_kernel_info *ki, const er_vec_ops *ops, bool isa_ok);

er_status er__kconv_cd_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out, size_t *scratch_out);

er_status er__kconv_cd_run(const er_kernel_run *kr);

bool er__kconv_wino_supports(const er_kernel_info *ki, bool isa_ok, int tile);

void er__kconv_wino_release(void *state);

er_status er__kconv_wino_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops, int tile,
                              void **state_out, size_t *scratch_out);

er_status er__kconv_wino_run(const er_kernel_run *kr);

bool er__kconv_convt_supports(const er_kernel_info *ki, bool isa_ok);

er_status er__kconv_convt_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, void **state_out,
                               size_t *scratch_out);

er_status er__kconv_convt_run(const er_kernel_run *kr);

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static inline bool is_fused(const er_kernel_info *ki) { return strcmp(ki->node->domain, ER_FUSED_DOMAIN) == 0; }

/* p + o, or NULL for a null p (sizing a problem at compile time, when no
 * tensor has data yet). */
static inline const float *at(const float *p, int64_t o) { return p ? p + o : NULL; }

/* Constant 2-D weights the direct kernel could take at some size. */
static inline bool cd_weights_ok(const er_kernel_info *ki) {
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if (x->rank != 4 || w->rank != 4 || !w->data || !er__tensor_shape_known(w) || !er__kconv_dense_unit_steps(ki)) return false;
  return w->dims[0] <= CD_MAX_M && w->dims[1] * w->dims[2] * w->dims[3] <= CD_MAX_K &&
         w->dims[2] * w->dims[3] >= 2;
}

static inline void cd_release(void *state) {
  cd_state *s = state;
  if (!s) return;
  er__aligned_free(s->wp);
  free(s);
}

static inline void convt_release(void *state) {
  convt_state *s = state;
  if (!s) return;
  er__aligned_free(s->packed);
  free(s);
}

#endif /* ER_KERNELS_CONV_IMPL_H */
