/* cmd-devices.c - `edgerun devices`: what this machine offers edgerun.
 *
 * The CPU (model, cores, ISA features from cpuid on x86 and from the kernel's
 * Features line on Arm), memory, thermal zones with their temperatures, and
 * every backend with its devices or the reason it is unusable. Text for a
 * terminal, --json for scripts, --html for a site engineer's report.
 * --require BACKEND makes a missing or unusable backend a non-zero exit, so a
 * provisioning script can stop before deploying a model that needs it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "cli/cli.h"
#include "edgerun-backend.h"

void er_cmd_devices_help(FILE *out) {
  fprintf(out,
          "usage: edgerun devices [--json | --html FILE] [--require BACKEND[,BACKEND...]]\n"
          "                       [--backend-path P]\n\n"
          "Lists the CPU (model, cores, ISA features such as AVX2, AVX-512, VNNI, AMX,\n"
          "NEON, dotprod, i8mm), memory, thermal zones with temperatures, and every\n"
          "backend edgerun knows (cpu, opencl, cuda, loaded plugins) with its devices,\n"
          "driver and runtime versions, or the reason it cannot be used here.\n"
          "--json prints one object; --html writes a self-contained report to FILE.\n"
          "--require exits with status 1 when a named backend is missing or has no\n"
          "usable device.\n");
}

#define MAX_FEATURES 48
#define MAX_ZONES 32
#define MAX_BACKENDS 48
#define MAX_DEVS 8

typedef struct zone {
  char name[64];
  char type[64];
  double celsius;            /* NAN when unreadable */
} zone;

typedef struct backend_rep {
  er_backend_info info;
  er_device_desc dev[MAX_DEVS];
  int n_dev;
} backend_rep;

typedef struct report {
  char hostname[128];
  char cpu_model[160];
  char cpu_vendor[64];
  char arch[32];
  long cores_online;
  const char *features[MAX_FEATURES];
  int n_features;
  unsigned long long mem_total_kib, mem_avail_kib;  /* KiB, from /proc/meminfo */
  zone zones[MAX_ZONES];
  int n_zones;
  backend_rep be[MAX_BACKENDS];
  int n_be;
} report;

/* ---- the CPU ------------------------------------------------------------- */

static void add_feature(report *r, const char *f) {
  if (r->n_features < MAX_FEATURES) r->features[r->n_features++] = f;
}

#if defined(__x86_64__) || defined(__i386__)
/* The features edgerun's kernels care about. A feature counts only when the
 * OS saves its registers (XCR0), as a kernel would fault otherwise. */
static void x86_features(report *r) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  bool sse42 = c & (1u << 20), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
  bool osxsave = c & (1u << 27);
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = ((unsigned long long)hi << 32) | lo;
  }
  bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
  if (sse42) add_feature(r, "SSE4.2");
  if (avx && ymm) add_feature(r, "AVX");
  if (fma && ymm) add_feature(r, "FMA");
  if (f16c && ymm) add_feature(r, "F16C");
  unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0, b71, c71, d71;
  if (__get_cpuid_max(0, NULL) >= 7) {
    __cpuid_count(7, 0, a7, b7, c7, d7);
    __cpuid_count(7, 1, a71, b71, c71, d71);
    (void)b71;
    (void)c71;
    (void)d71;
  }
  if ((b7 & (1u << 5)) && ymm) add_feature(r, "AVX2");
  if ((a71 & (1u << 4)) && ymm) add_feature(r, "AVX-VNNI");
  if ((b7 & (1u << 16)) && zmm) add_feature(r, "AVX-512F");
  if ((b7 & (1u << 30)) && zmm) add_feature(r, "AVX-512BW");
  if ((c7 & (1u << 1)) && zmm) add_feature(r, "AVX-512-VBMI");
  if ((c7 & (1u << 11)) && zmm) add_feature(r, "AVX-512-VNNI");
  if ((a71 & (1u << 5)) && zmm) add_feature(r, "AVX-512-BF16");
  if ((d7 & (1u << 23)) && zmm) add_feature(r, "AVX-512-FP16");
  if ((d7 & (1u << 24)) && tiles) add_feature(r, "AMX-TILE");
  if ((d7 & (1u << 25)) && tiles) add_feature(r, "AMX-INT8");
  if ((d7 & (1u << 22)) && tiles) add_feature(r, "AMX-BF16");
}
#endif

/* Arm: the kernel's "Features" line (asimd = NEON). */
static void arm_features(report *r, const char *flags) {
  static const struct { const char *flag, *name; } map[] = {
      {"asimd", "NEON"}, {"asimddp", "dotprod"}, {"i8mm", "i8mm"}, {"asimdhp", "fp16"},
      {"bf16", "bf16"},  {"sve", "SVE"},         {"sve2", "SVE2"}, {"sme", "SME"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    const char *p = flags;
    size_t len = strlen(map[i].flag);
    while ((p = strstr(p, map[i].flag)) != NULL) {
      bool start = p == flags || p[-1] == ' ' || p[-1] == '\t';
      bool end = p[len] == '\0' || p[len] == ' ' || p[len] == '\n';
      if (start && end) {
        add_feature(r, map[i].name);
        break;
      }
      p += len;
    }
  }
}

static void read_cpu(report *r) {
  r->cores_online = sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__x86_64__)
  snprintf(r->arch, sizeof r->arch, "x86_64");
#elif defined(__aarch64__)
  snprintf(r->arch, sizeof r->arch, "aarch64");
#else
  snprintf(r->arch, sizeof r->arch, "other");
#endif
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[4096];
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    if (!r->cpu_model[0] && (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0))
      snprintf(r->cpu_model, sizeof r->cpu_model, "%s", v);
    else if (!r->cpu_vendor[0] && (strncmp(line, "vendor_id", 9) == 0 || strncmp(line, "CPU implementer", 15) == 0))
      snprintf(r->cpu_vendor, sizeof r->cpu_vendor, "%s", v);
#if !defined(__x86_64__) && !defined(__i386__)
    else if (r->n_features == 0 && strncmp(line, "Features", 8) == 0)
      arm_features(r, v);
#endif
  }
  if (f) fclose(f);
#if defined(__x86_64__) || defined(__i386__)
  x86_features(r);
  (void)arm_features;
#endif
}

static void read_memory(report *r) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long v;
    if (sscanf(line, "MemTotal: %llu kB", &v) == 1) r->mem_total_kib = v;
    if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) r->mem_avail_kib = v;
  }
  if (f) fclose(f);
}

static int cmp_zone(const void *a, const void *b) {
  const zone *x = a, *y = b;
  size_t lx = strlen(x->name), ly = strlen(y->name);
  return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->name, y->name);
}

static void read_thermal(report *r) {
  const char *root = getenv("EDGERUN_THERMAL_ROOT");  /* for tests */
  if (!root) root = "/sys/class/thermal";
  DIR *d = opendir(root);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL && r->n_zones < MAX_ZONES) {
    if (strncmp(e->d_name, "thermal_zone", 12) != 0) continue;
    zone *z = &r->zones[r->n_zones];
    char path[512], buf[64];
    snprintf(z->name, sizeof z->name, "%s", e->d_name);
    snprintf(path, sizeof path, "%s/%s/type", root, e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(buf, sizeof buf, f)) buf[strcspn(buf, "\n")] = '\0';
    else snprintf(buf, sizeof buf, "?");
    if (f) fclose(f);
    snprintf(z->type, sizeof z->type, "%s", buf);
    snprintf(path, sizeof path, "%s/%s/temp", root, e->d_name);
    f = fopen(path, "r");
    long milli;
    /* The kernel reports millidegrees Celsius. */
    z->celsius = f && fscanf(f, "%ld", &milli) == 1 ? milli / 1000.0 : NAN;
    if (f) fclose(f);
    r->n_zones++;
  }
  if (d) closedir(d);
  qsort(r->zones, (size_t)r->n_zones, sizeof *r->zones, cmp_zone);
}

static void read_backends(report *r) {
  size_t n = er_backend_count();
  for (size_t i = 0; i < n && r->n_be < MAX_BACKENDS; i++) {
    backend_rep *b = &r->be[r->n_be];
    if (er_backend_get_info(i, &b->info) != ER_STATUS_OK) continue;
    for (int k = 0; k < b->info.device_count && k < MAX_DEVS; k++)
      if (er_backend_device(b->info.name, k, &b->dev[b->n_dev]) == ER_STATUS_OK) b->n_dev++;
    r->n_be++;
  }
}

/* ---- output -------------------------------------------------------------- */

static const char *kind_name(er_device_kind k) {
  switch (k) {
    case ER_DEVICE_CPU: return "cpu";
    case ER_DEVICE_GPU: return "gpu";
    case ER_DEVICE_NPU: return "npu";
    default: return "other";
  }
}

static void print_text(FILE *o, const report *r) {
  fprintf(o, "host:      %s\n", r->hostname);
  fprintf(o, "cpu:       %s (%s, %s, %ld cores online)\n", r->cpu_model[0] ? r->cpu_model : "unknown",
          r->cpu_vendor[0] ? r->cpu_vendor : "unknown vendor", r->arch, r->cores_online);
  fprintf(o, "features: ");
  for (int i = 0; i < r->n_features; i++) fprintf(o, " %s", r->features[i]);
  fprintf(o, "%s\n", r->n_features ? "" : " (none detected)");
  fprintf(o, "memory:    %.1f GiB total, %.1f GiB available\n", r->mem_total_kib / 1048576.0,
          r->mem_avail_kib / 1048576.0);
  fprintf(o, "thermal:  ");
  for (int i = 0; i < r->n_zones; i++)
    if (r->zones[i].celsius == r->zones[i].celsius)
      fprintf(o, " %s (%s) %.1f C;", r->zones[i].name, r->zones[i].type, r->zones[i].celsius);
    else
      fprintf(o, " %s (%s) unreadable;", r->zones[i].name, r->zones[i].type);
  fprintf(o, "%s\n", r->n_zones ? "" : " no thermal zones exposed");
  fprintf(o, "backends:\n");
  for (int i = 0; i < r->n_be; i++) {
    const backend_rep *b = &r->be[i];
    fprintf(o, "  %-8s %s%s%s\n", b->info.name,
            b->info.status[0] ? "unavailable: " : (b->info.plugin ? "ready (plugin)" : "ready"),
            b->info.status, "");
    for (int k = 0; k < b->n_dev; k++) {
      const er_device_desc *d = &b->dev[k];
      fprintf(o, "    [%d] %s: %s", k, kind_name(d->kind), d->name);
      if (d->vendor[0]) fprintf(o, " (%s)", d->vendor);
      if (d->driver[0]) fprintf(o, ", %s", d->driver);
      if (d->memory_bytes) fprintf(o, ", %.1f GiB", d->memory_bytes / 1073741824.0);
      if (d->compute_units) fprintf(o, ", %d compute units", d->compute_units);
      fprintf(o, "\n");
    }
  }
}

static void print_json(FILE *o, const report *r) {
  fprintf(o, "{\"host\": ");
  er_cli_json_string(o, r->hostname);
  fprintf(o, ",\n \"cpu\": {\"model\": ");
  er_cli_json_string(o, r->cpu_model);
  fprintf(o, ", \"vendor\": ");
  er_cli_json_string(o, r->cpu_vendor);
  fprintf(o, ", \"arch\": \"%s\", \"cores_online\": %ld, \"features\": [", r->arch, r->cores_online);
  for (int i = 0; i < r->n_features; i++) fprintf(o, "%s\"%s\"", i ? ", " : "", r->features[i]);
  fprintf(o, "]},\n \"memory\": {\"total_bytes\": %llu, \"available_bytes\": %llu},\n \"thermal_zones\": [",
          r->mem_total_kib * 1024, r->mem_avail_kib * 1024);
  for (int i = 0; i < r->n_zones; i++) {
    fprintf(o, "%s{\"zone\": ", i ? ", " : "");
    er_cli_json_string(o, r->zones[i].name);
    fprintf(o, ", \"type\": ");
    er_cli_json_string(o, r->zones[i].type);
    if (r->zones[i].celsius == r->zones[i].celsius) fprintf(o, ", \"celsius\": %.1f}", r->zones[i].celsius);
    else fprintf(o, ", \"celsius\": null}");
  }
  fprintf(o, "],\n \"backends\": [");
  for (int i = 0; i < r->n_be; i++) {
    const backend_rep *b = &r->be[i];
    fprintf(o, "%s\n  {\"name\": ", i ? "," : "");
    er_cli_json_string(o, b->info.name);
    fprintf(o, ", \"built\": %s, \"plugin\": %s, \"available\": %s, \"status\": ", b->info.built ? "true" : "false",
            b->info.plugin ? "true" : "false", b->info.status[0] ? "false" : "true");
    er_cli_json_string(o, b->info.status);
    fprintf(o, ", \"devices\": [");
    for (int k = 0; k < b->n_dev; k++) {
      const er_device_desc *d = &b->dev[k];
      fprintf(o, "%s{\"name\": ", k ? ", " : "");
      er_cli_json_string(o, d->name);
      fprintf(o, ", \"vendor\": ");
      er_cli_json_string(o, d->vendor);
      fprintf(o, ", \"driver\": ");
      er_cli_json_string(o, d->driver);
      fprintf(o, ", \"kind\": \"%s\", \"memory_bytes\": %llu, \"compute_units\": %d}", kind_name(d->kind),
              (unsigned long long)d->memory_bytes, d->compute_units);
    }
    fprintf(o, "]}");
  }
  fprintf(o, "]}\n");
}

static void html_text(FILE *o, const char *s) {
  for (const char *p = s; p && *p; p++) {
    switch (*p) {
      case '<': fputs("&lt;", o); break;
      case '>': fputs("&gt;", o); break;
      case '&': fputs("&amp;", o); break;
      case '"': fputs("&quot;", o); break;
      default: fputc(*p, o);
    }
  }
}

/* Thresholds for the colour of a temperature cell (degrees Celsius): most
 * embedded SoCs throttle between 80 and 95. */
#define ER_TEMP_WARM 70.0
#define ER_TEMP_HOT 85.0

static void print_html(FILE *o, const report *r) {
  char when[64];
  time_t now = time(NULL);
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", localtime_r(&now, &tm));
  int ready = 0, accel = 0;
  for (int i = 0; i < r->n_be; i++)
    if (!r->be[i].info.status[0]) {
      ready++;
      if (strcmp(r->be[i].info.name, "cpu") != 0) accel++;
    }
  fprintf(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>edgerun devices: ");
  html_text(o, r->hostname);
  fprintf(o, "</title>\n<style>\n"
             "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}\n"
             "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}\n"
             "table{border-collapse:collapse;width:100%%}td,th{border:1px solid #ccc;padding:.35em .6em;"
             "text-align:left;vertical-align:top}th{background:#f2f2f2}\n"
             ".ok{background:#e3f4e3}.bad{background:#fbe3e3}.warm{background:#fff3d6}\n"
             ".summary{font-size:1.1em;padding:.8em;border-radius:4px}\n"
             "code{background:#f5f5f5;padding:0 .2em}\n</style></head><body>\n");
  fprintf(o, "<h1>edgerun device report: ");
  html_text(o, r->hostname);
  fprintf(o, "</h1>\n<p>Written %s by <code>edgerun devices --html</code> (edgerun %s).</p>\n", when, er_version());
  fprintf(o, "<p class=\"summary %s\">%s: %d of %d backends ready, %d of them accelerators.</p>\n",
          accel ? "ok" : "warm", accel ? "Accelerator available" : "CPU only", ready, r->n_be, accel);
  fprintf(o, "<h2>Backends</h2>\n<table><tr><th>backend</th><th>status</th><th>devices</th></tr>\n");
  for (int i = 0; i < r->n_be; i++) {
    const backend_rep *b = &r->be[i];
    fprintf(o, "<tr class=\"%s\"><td>", b->info.status[0] ? "bad" : "ok");
    html_text(o, b->info.name);
    fprintf(o, "%s</td><td>", b->info.plugin ? " (plugin)" : "");
    if (b->info.status[0]) {
      fputs("not usable: ", o);
      html_text(o, b->info.status);
    } else {
      fputs("ready", o);
    }
    fprintf(o, "</td><td>");
    for (int k = 0; k < b->n_dev; k++) {
      const er_device_desc *d = &b->dev[k];
      fprintf(o, "%s[%d] %s: ", k ? "<br>" : "", k, kind_name(d->kind));
      html_text(o, d->name);
      if (d->vendor[0]) {
        fputs(" (", o);
        html_text(o, d->vendor);
        fputs(")", o);
      }
      if (d->driver[0]) {
        fputs(", ", o);
        html_text(o, d->driver);
      }
      if (d->memory_bytes) fprintf(o, ", %.1f GiB", d->memory_bytes / 1073741824.0);
      if (d->compute_units) fprintf(o, ", %d compute units", d->compute_units);
    }
    fprintf(o, "%s</td></tr>\n", b->n_dev ? "" : "-");
  }
  fprintf(o, "</table>\n<h2>Processor</h2>\n<table>\n<tr><th>model</th><td>");
  html_text(o, r->cpu_model[0] ? r->cpu_model : "unknown");
  fprintf(o, "</td></tr>\n<tr><th>vendor</th><td>");
  html_text(o, r->cpu_vendor[0] ? r->cpu_vendor : "unknown");
  fprintf(o, "</td></tr>\n<tr><th>architecture</th><td>%s</td></tr>\n<tr><th>cores online</th><td>%ld</td></tr>\n"
             "<tr><th>instruction set features</th><td>",
          r->arch, r->cores_online);
  for (int i = 0; i < r->n_features; i++) fprintf(o, "%s%s", i ? ", " : "", r->features[i]);
  fprintf(o, "%s</td></tr>\n<tr><th>memory</th><td>%.1f GiB total, %.1f GiB available</td></tr>\n</table>\n",
          r->n_features ? "" : "none detected", r->mem_total_kib / 1048576.0, r->mem_avail_kib / 1048576.0);
  fprintf(o, "<h2>Temperatures</h2>\n");
  if (!r->n_zones) fprintf(o, "<p>This machine exposes no thermal zones (/sys/class/thermal).</p>\n");
  else fprintf(o, "<table><tr><th>zone</th><th>sensor</th><th>temperature</th></tr>\n");
  for (int i = 0; i < r->n_zones; i++) {
    double t = r->zones[i].celsius;
    const char *cls = t != t ? "" : t >= ER_TEMP_HOT ? "bad" : t >= ER_TEMP_WARM ? "warm" : "ok";
    fprintf(o, "<tr class=\"%s\"><td>", cls);
    html_text(o, r->zones[i].name);
    fputs("</td><td>", o);
    html_text(o, r->zones[i].type);
    if (t == t) fprintf(o, "</td><td>%.1f &deg;C%s</td></tr>\n", t, t >= ER_TEMP_HOT ? " (hot: check cooling)" : "");
    else fprintf(o, "</td><td>unreadable</td></tr>\n");
  }
  if (r->n_zones) fprintf(o, "</table>\n");
  fprintf(o, "</body></html>\n");
}

/* Writes the HTML to a temporary file and renames it, so a reader never
 * sees half a report. */
static int write_html(const char *path, const report *r) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return er_cli_fail("devices", "cannot write '%s': %s", tmp, strerror(errno));
  print_html(f, r);
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return er_cli_fail("devices", "cannot write '%s': %s", path, strerror(e));
  }
  return 0;
}

int er_cmd_devices(int argc, char **argv) {
  bool json = false;
  const char *html = NULL, *require = NULL;
  er_cli_backend be;
  er_cli_backend_init(&be);
  for (int i = 1; i < argc; i++) {
    int used = er_cli_backend_arg("devices", &be, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    if (strcmp(argv[i], "--json") == 0) json = true;
    else if (strcmp(argv[i], "--html") == 0) {
      if (++i >= argc) return er_cli_fail("devices", "--html needs a file name");
      html = argv[i];
    } else if (strcmp(argv[i], "--require") == 0) {
      if (++i >= argc) return er_cli_fail("devices", "--require needs a backend name");
      require = argv[i];
    } else {
      return er_cli_fail("devices", "unknown argument '%s' (see edgerun devices --help)", argv[i]);
    }
  }
  if (er_cli_backend_load("devices", &be)) return 1;
  report *r = calloc(1, sizeof *r);
  if (!r) return er_cli_fail("devices", "out of memory");
  if (gethostname(r->hostname, sizeof r->hostname - 1) != 0) snprintf(r->hostname, sizeof r->hostname, "unknown");
  read_cpu(r);
  read_memory(r);
  read_thermal(r);
  read_backends(r);
  int rc = 0;
  if (html) rc = write_html(html, r);
  else if (json) print_json(stdout, r);
  else print_text(stdout, r);
  if (require && !rc) {
    char list[256];
    snprintf(list, sizeof list, "%s", require);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
      bool found = false;
      for (int i = 0; i < r->n_be; i++) {
        if (strcmp(r->be[i].info.name, tok) != 0) continue;
        found = true;
        if (r->be[i].info.status[0]) rc = er_cli_fail("devices", "required backend '%s' is not usable: %s", tok, r->be[i].info.status);
      }
      if (!found)
        rc = er_cli_fail("devices", "required backend '%s' is not known here (built-in: cpu, opencl, cuda; "
                         "plugins load with --backend-path)", tok);
    }
  }
  free(r);
  return rc;
}
