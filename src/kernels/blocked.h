/* blocked.h - the channel-blocked layout's kernels (ops/blocked.c), written
 * once in blocked-impl.h over simd.h and compiled per ISA with the block
 * equal to the vector width (VN floats). blocked.c prepares and splits the
 * work; everything here runs on one image and a range of work units. */
#ifndef ER_KERNELS_BLOCKED_H
#define ER_KERNELS_BLOCKED_H

#include "kernels/kernel.h"
#include "ops/fused.h"

/* A dense convolution of one image (group 1). The input is either blocked
 * [CB][H][W][B], or planar [C][H][W] (a stem reading the image in place);
 * either way it may be a zero-padded copy, so that every tap a tile reads
 * exists: then pt = pl = 0 and h, w are the padded extents. */
typedef struct er_bconv {
  const float *x;
  bool planar;
  int64_t lanes;               /* input channels per input block: B, or C when planar */
  int64_t cbk;                 /* input blocks: CB, or 1 when planar */
  int64_t h, w;                /* input extents (padded when a copy) */
  int64_t oh, ow;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pt, pl;              /* padding still to apply (0 for a padded copy) */
  const float *wp;             /* [MB][cbk][kh][kw][lanes][B] */
  const float *bias;           /* [MB * B], zeros past M; or NULL */
  const float *add;            /* blocked residual [MB][OH][OW][B] or NULL */
  float *y;                    /* [MB][OH][OW][B] */
  int64_t mb, m;               /* output blocks and channels */
  er_activation act;
  /* Work unit u covers one output row of one group of up to gb output
   * blocks; rows_outer orders units row-major (every group of a row, then
   * the next row: weights stay cached) or group-major (every row of a
   * group: its input rows stay cached). */
  bool rows_outer;
  int64_t gb;                  /* output blocks per group: 2, or ops gb_max */
  int64_t groups;              /* ceil(mb / gb) */
  /* Input blocks per pass over an output row (cbk: one pass). Between
   * passes the partial sums live in y, so not when add aliases y. */
  int64_t kchunk;
  /* Floats between input blocks and between output blocks (h * w * B and
   * oh * ow * B, except for a flattened plane). */
  int64_t xbs, ybs;
  /* A 1x1 stride-1 layer may run over its plane flattened into rows of
   * whole tiles (h = oh rows of w = ow pixels): the last row then has
   * ow_last pixels (0: as many as the others). */
  int64_t ow_last;
} er_bconv;

/* A depthwise convolution or a pool of one image, blocked in and out. */
typedef struct er_bdw {
  const float *x;              /* [CB][H][W][B] */
  int64_t cb, h, w, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  const float *wp;             /* conv: [CB][kh][kw][gw][B]; NULL for pools */
  int gw;                      /* conv: lanes per group: 1 depthwise, or 2, 4,
                                  8 < B (narrow groups: lane l of a block reads
                                  the gw lanes of its group, l / gw * gw + k) */
  const float *bias;           /* conv: [CB * B] or NULL */
  const float *add;            /* conv: blocked residual or NULL */
  float *y;                    /* [CB][OH][OW][B] */
  int64_t m;                   /* conv: channels (lanes past m zeroed) */
  er_activation act;
  int pool;                    /* 0 conv, 1 max, 2 average */
  bool count_include_pad;
  int64_t pb, pr;              /* padding after (the average's divisor) */
  /* Work unit u: output row u % oh of block u / oh. */
} er_bdw;

typedef struct er_blocked_ops {
  const char *isa;
  int vn;                      /* the block: floats per vector */
  int rmax;                    /* widest dense tile, in pixels */
  int acc;                     /* accumulators a dense tile keeps: nb blocks x
                                  min(acc / nb, rmax) pixels */
  int gb_max;                  /* output blocks a 1x1 layer's work unit may take */
  int64_t kchunk_bytes;        /* a 1x1 group's weight bytes per pass over a row
                                  (0: all input blocks in one pass) */
  /* Dense convolution, work units [u0, u1). */
  void (*conv)(const er_bconv *a, int64_t u0, int64_t u1);
  /* Depthwise convolution or windowed pool, work units [u0, u1). */
  void (*dw)(const er_bdw *a, int64_t u0, int64_t u1);
  /* Global average (max = false) or max pool of blocks [b0, b1):
   * y[b][0..B) over x[b][0..hw)[0..B). */
  void (*global_pool)(const float *x, float *y, int64_t hw, int64_t b0, int64_t b1, bool max);
  /* Planar [c][hw] -> blocked blocks [b0, b1) of [cb][hw][B] (zeros past
   * c), and back (the first c channels). */
  void (*to_blocked)(const float *x, float *y, int64_t c, int64_t hw, int64_t b0, int64_t b1);
  void (*from_blocked)(const float *x, float *y, int64_t c, int64_t hw, int64_t b0, int64_t b1);
  /* Channels-last [hw][c] -> pixels [p0, p1) of every block of
   * [cb][hw][B] (zeros past c), and back. */
  void (*to_blocked_cl)(const float *x, float *y, int64_t c, int64_t hw, int64_t p0, int64_t p1);
  void (*from_blocked_cl)(const float *x, float *y, int64_t c, int64_t hw, int64_t p0, int64_t p1);
  /* Copies input block range [b0, b1) of x [..][h][w][lanes] (blocked,
   * lanes = B) or planes [b0, b1) of planar x [..][h][w] (lanes = 1) into
   * y with pt / pb rows and pl / pr columns of zeros around each. */
  void (*pad)(const float *x, float *y, int64_t h, int64_t w, int64_t lanes, int64_t pt, int64_t pb, int64_t pl,
              int64_t pr, int64_t b0, int64_t b1);
  /* y[p][0..B) = act(x[p][0..B) * a[0..B) + b[0..B)) for the hw pixels of
   * one block (a per-lane affine: BlockedBatchNormalization), lanes from
   * `valid` on set to 0. */
  void (*affine)(const float *x, float *y, int64_t hw, const float *a, const float *b, const er_activation *act,
                 int valid);
} er_blocked_ops;

#if defined(__x86_64__) || defined(__i386__)
extern const er_blocked_ops er__blocked_avx512;
extern const er_blocked_ops er__blocked_avx2;
#endif
#if defined(__aarch64__)
extern const er_blocked_ops er__blocked_neon;
#endif

#endif /* ER_KERNELS_BLOCKED_H */
