/* registry.h - the backends a process knows: the built-in ones compiled
 * into this build and the plugins loaded at run time. */
#ifndef ER_REGISTRY_H
#define ER_REGISTRY_H

#include "backends/backend.h"

/* The most plugins a process may load, and the longest plugin name. */
#define ER_MAX_PLUGINS 32
#define ER_PLUGIN_NAME_BYTES 32

/* Adds a backend (plugins: owned by the registry from then on).
 * INVALID_ARGUMENT when one of that name exists. */
er_status er__registry_add(er_backend *be, bool plugin);

/* The host API table plugins receive. */
const er_host_api *er__host_api(void);

#endif /* ER_REGISTRY_H */
