/* image.c - PNG (libpng) and JPEG (libjpeg-turbo) decoding and the declared
 * preprocessing that turns a picture into an input tensor. Both libraries
 * come from Debian packages; their error paths return here through
 * setjmp/longjmp so a broken file is an error status, never an exit. */
#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
/* jpeglib.h needs size_t and FILE declared before it. */
#include <jpeglib.h>
#include <png.h>

#include "quant/dataset.h"

static er_status check_size(const char *path, uint64_t w, uint64_t h) {
  if (w == 0 || h == 0 || w * h > ER_IMAGE_MAX_PIXELS)
    return er__error(ER_STATUS_LIMIT, "image '%s' is %llux%llu pixels; at most %llu pixels are read "
                     "(ER_IMAGE_MAX_PIXELS)", path, (unsigned long long)w, (unsigned long long)h,
                     (unsigned long long)ER_IMAGE_MAX_PIXELS);
  return ER_STATUS_OK;
}

static er_status decode_png(const char *path, uint8_t **px, int *h, int *w, int *c) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path))
    return er__error(ER_STATUS_MALFORMED, "PNG '%s': %s", path, img.message);
  er_status st = check_size(path, img.width, img.height);
  if (st != ER_STATUS_OK) {
    png_image_free(&img);
    return st;
  }
  bool gray = (img.format & PNG_FORMAT_FLAG_COLOR) == 0;
  /* Alpha is composited onto black, the usual choice for model inputs. */
  img.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  size_t bytes = PNG_IMAGE_SIZE(img);
  uint8_t *buf = malloc(bytes);
  if (!buf) {
    png_image_free(&img);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory decoding '%s'", path);
  }
  png_color black = {0, 0, 0};
  if (!png_image_finish_read(&img, &black, buf, 0, NULL)) {
    st = er__error(ER_STATUS_MALFORMED, "PNG '%s': %s", path, img.message);
    free(buf);
    png_image_free(&img);
    return st;
  }
  *px = buf;
  *h = (int)img.height;
  *w = (int)img.width;
  *c = gray ? 1 : 3;
  return ER_STATUS_OK;
}

typedef struct jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_fail(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  (*cinfo->err->format_message)(cinfo, e->msg);
  longjmp(e->jump, 1);
}

static void jpeg_quiet(j_common_ptr cinfo, int level) {
  /* Warnings (corrupt-but-decodable data) are not printed. */
  (void)cinfo;
  (void)level;
}

static er_status decode_jpeg(const char *path, uint8_t **px, int *h, int *w, int *c) {
  FILE *f = fopen(path, "rb");
  if (!f) return er__error(ER_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  /* Written inside the setjmp region and read after a longjmp. */
  uint8_t *volatile buf = NULL;
  er_status st = ER_STATUS_OK;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_fail;
  err.pub.emit_message = jpeg_quiet;
  if (setjmp(err.jump)) {
    st = er__error(ER_STATUS_MALFORMED, "JPEG '%s': %s", path, err.msg);
    goto done;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    st = er__error(ER_STATUS_UNSUPPORTED, "JPEG '%s' is CMYK; convert it to RGB first", path);
    goto done;
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  st = check_size(path, cinfo.image_width, cinfo.image_height);
  if (st != ER_STATUS_OK) goto done;
  jpeg_start_decompress(&cinfo);
  int comps = cinfo.output_components;
  size_t row = (size_t)cinfo.output_width * (size_t)comps;
  buf = malloc(row * cinfo.output_height);
  if (!buf) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory decoding '%s'", path);
    goto done;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW r = buf + row * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_decompress(&cinfo);
  *px = buf;
  *h = (int)cinfo.output_height;
  *w = (int)cinfo.output_width;
  *c = comps;
  buf = NULL;
done:
  jpeg_destroy_decompress(&cinfo);
  fclose(f);
  free(buf);
  return st;
}

er_status er__image_decode(const char *path, uint8_t **pixels_out, int *h_out, int *w_out, int *c_out) {
  FILE *f = fopen(path, "rb");
  if (!f) return er__error(ER_STATUS_IO, "cannot open image '%s': %s", path, strerror(errno));
  uint8_t sig[8] = {0};
  size_t n = fread(sig, 1, sizeof sig, f);
  fclose(f);
  if (n >= 8 && png_sig_cmp(sig, 0, 8) == 0) return decode_png(path, pixels_out, h_out, w_out, c_out);
  if (n >= 3 && sig[0] == 0xff && sig[1] == 0xd8 && sig[2] == 0xff)
    return decode_jpeg(path, pixels_out, h_out, w_out, c_out);
  return er__error(ER_STATUS_MALFORMED, "'%s' is neither a PNG nor a JPEG image", path);
}

/* Bilinear sample of channel ch at fractional (y, x), edges clamped. */
static float sample(const uint8_t *px, int h, int w, int c, int ch, float y, float x) {
  if (y < 0) y = 0;
  if (x < 0) x = 0;
  int y0 = (int)y, x0 = (int)x;
  if (y0 > h - 1) y0 = h - 1;
  if (x0 > w - 1) x0 = w - 1;
  int y1 = y0 + 1 < h ? y0 + 1 : h - 1, x1 = x0 + 1 < w ? x0 + 1 : w - 1;
  float fy = y - (float)y0, fx = x - (float)x0;
  if (fy > 1) fy = 1;
  if (fx > 1) fx = 1;
  float a = px[((size_t)y0 * (size_t)w + (size_t)x0) * (size_t)c + (size_t)ch];
  float b = px[((size_t)y0 * (size_t)w + (size_t)x1) * (size_t)c + (size_t)ch];
  float d = px[((size_t)y1 * (size_t)w + (size_t)x0) * (size_t)c + (size_t)ch];
  float e = px[((size_t)y1 * (size_t)w + (size_t)x1) * (size_t)c + (size_t)ch];
  return (a * (1 - fx) + b * fx) * (1 - fy) + (d * (1 - fx) + e * fx) * fy;
}

void er__image_prepare(const uint8_t *px, int h, int w, int c, const er_image_prep *p, float *dst) {
  int oh = p->height, ow = p->width, oc = p->channels;
  float sy = (float)h / (float)oh, sx = (float)w / (float)ow;
  for (int y = 0; y < oh; y++) {
    /* Half-pixel centres, as most resize operations (and PIL) use. */
    float fy = ((float)y + 0.5f) * sy - 0.5f;
    for (int x = 0; x < ow; x++) {
      float fx = ((float)x + 0.5f) * sx - 0.5f;
      float rgb[3];
      if (c == 1) {
        rgb[0] = rgb[1] = rgb[2] = sample(px, h, w, c, 0, fy, fx);
      } else {
        for (int k = 0; k < 3; k++) rgb[k] = sample(px, h, w, c, k, fy, fx);
      }
      for (int k = 0; k < oc; k++) {
        float v;
        if (oc == 1) v = c == 1 ? rgb[0] : 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
        else v = rgb[p->bgr ? 2 - k : k];
        v = (v * p->scale - p->mean[k]) / p->std[k];
        size_t at = p->nhwc ? ((size_t)y * (size_t)ow + (size_t)x) * (size_t)oc + (size_t)k
                            : ((size_t)k * (size_t)oh + (size_t)y) * (size_t)ow + (size_t)x;
        dst[at] = v;
      }
    }
  }
}
