/* registry.c - finding backends by name and describing them (the
 * built-in CPU, OpenCL and CUDA backends, then loaded plugins). */
#include "backends/registry.h"

#include <pthread.h>
#include <stdio.h>

#ifndef ER_HAVE_OPENCL
er_backend *er__backend_opencl(void) { return NULL; }
#endif
#ifndef ER_HAVE_CUDA
er_backend *er__backend_cuda(void) { return NULL; }
#endif

/* Built-in backends in the order `edgerun devices` lists them, with what
 * a user must do when one was not compiled in. */
static const struct builtin {
  const char *name;
  er_backend *(*get)(void);
  const char *missing;
} builtins[] = {
    {"cpu", er__backend_cpu, ""},
    {"opencl", er__backend_opencl,
     "edgerun was built without OpenCL (install the Debian packages ocl-icd-opencl-dev and "
     "opencl-headers, then configure and build again)"},
    {"cuda", er__backend_cuda,
#ifdef ER_CUDA_NOT_BUILT_WHY
     "edgerun was built without CUDA (" ER_CUDA_NOT_BUILT_WHY ")"},
#else
     "edgerun was built without CUDA (no nvcc was found when CMake configured the build; "
     "install the CUDA toolkit and configure again)"},
#endif
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static er_backend *plugins[ER_MAX_PLUGINS];
static size_t n_plugins;

er_status er__registry_add(er_backend *be, bool plugin) {
  ER_UNUSED(plugin);
  const char *name = be->iface->name;
  for (size_t i = 0; i < ER_ARRAY_LEN(builtins); i++)
    if (strcmp(builtins[i].name, name) == 0)
      return er__error(ER_STATUS_INVALID_ARGUMENT,
                       "a plugin may not take the name of the built-in backend '%s'", name);
  er_status st = ER_STATUS_OK;
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < n_plugins && st == ER_STATUS_OK; i++)
    if (strcmp(plugins[i]->iface->name, name) == 0)
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "a backend named '%s' is already loaded", name);
  if (st == ER_STATUS_OK && n_plugins == ER_MAX_PLUGINS)
    st = er__error(ER_STATUS_LIMIT, "more than %d backend plugins (ER_MAX_PLUGINS)", ER_MAX_PLUGINS);
  if (st == ER_STATUS_OK) plugins[n_plugins++] = be;
  pthread_mutex_unlock(&reg_lock);
  return st;
}

er_backend *er__backend_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < ER_ARRAY_LEN(builtins); i++)
    if (strcmp(builtins[i].name, name) == 0) return builtins[i].get();
  er_backend *found = NULL;
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < n_plugins && !found; i++)
    if (strcmp(plugins[i]->iface->name, name) == 0) found = plugins[i];
  pthread_mutex_unlock(&reg_lock);
  return found;
}

/* Why `be` cannot run anything here, or NULL. */
static const char *unusable(er_backend *be) {
  if (be->iface->unavailable) {
    const char *why = be->iface->unavailable(be);
    if (why) return why;
  }
  if (be->iface->device_count && be->iface->device_count(be) <= 0) return "no device found";
  return NULL;
}

er_status er__backend_require(const char *name, er_backend **out) {
  if (!name) return er__error(ER_STATUS_INVALID_ARGUMENT, "a backend name is NULL");
  er_backend *be = er__backend_find(name);
  if (!be) {
    for (size_t i = 0; i < ER_ARRAY_LEN(builtins); i++)
      if (strcmp(builtins[i].name, name) == 0)
        return er__error(ER_STATUS_UNSUPPORTED, "backend '%s' is not available in this build: %s", name,
                         builtins[i].missing);
    char known[256] = "cpu";
    size_t used = strlen(known);
    for (size_t i = 1; i < ER_ARRAY_LEN(builtins); i++)
      if (builtins[i].get() && used < sizeof known)
        used += (size_t)snprintf(known + used, sizeof known - used, ", %s", builtins[i].name);
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < n_plugins; i++)
      if (used < sizeof known)
        used += (size_t)snprintf(known + used, sizeof known - used, ", %s", plugins[i]->iface->name);
    pthread_mutex_unlock(&reg_lock);
    return er__error(ER_STATUS_UNSUPPORTED,
                     "no backend named '%s' (known here: %s; load a plugin with --backend-path)", name,
                     known);
  }
  const char *why = unusable(be);
  if (why)
    return er__error(ER_STATUS_UNSUPPORTED, "backend '%s' is not available on this machine: %s", name,
                     why);
  *out = be;
  return ER_STATUS_OK;
}

size_t er_backend_count(void) {
  pthread_mutex_lock(&reg_lock);
  size_t n = ER_ARRAY_LEN(builtins) + n_plugins;
  pthread_mutex_unlock(&reg_lock);
  return n;
}

er_status er_backend_get_info(size_t index, er_backend_info *info) {
  if (!info) return er__error(ER_STATUS_INVALID_ARGUMENT, "er_backend_get_info: info_out is NULL");
  memset(info, 0, sizeof *info);
  er_backend *be = NULL;
  if (index < ER_ARRAY_LEN(builtins)) {
    info->name = builtins[index].name;
    be = builtins[index].get();
    if (!be) {
      info->status = builtins[index].missing;
      return ER_STATUS_OK;
    }
  } else {
    pthread_mutex_lock(&reg_lock);
    size_t k = index - ER_ARRAY_LEN(builtins);
    if (k < n_plugins) be = plugins[k];
    pthread_mutex_unlock(&reg_lock);
    if (!be) return er__error(ER_STATUS_NOT_FOUND, "backend index %zu is out of range", index);
    info->name = be->iface->name;
    info->plugin = true;
  }
  info->built = true;
  const char *why = unusable(be);
  info->status = why ? why : "";
  info->device_count = why ? 0 : be->iface->device_count(be);
  return ER_STATUS_OK;
}

er_status er_backend_device(const char *name, int device, er_device_desc *desc) {
  if (!desc) return er__error(ER_STATUS_INVALID_ARGUMENT, "er_backend_device: desc_out is NULL");
  er_backend *be;
  ER_CHECK(er__backend_require(name, &be));
  int n = be->iface->device_count(be);
  if (device < 0 || device >= n)
    return er__error(ER_STATUS_NOT_FOUND, "backend '%s' has %d device%s; %d does not exist", name, n,
                     n == 1 ? "" : "s", device);
  return be->iface->device_desc(be, device, desc);
}
