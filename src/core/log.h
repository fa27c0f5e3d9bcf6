/* log.h - one-line log messages from the core (fallback warnings, plugin
 * loading). Applications route them with er_log_set_callback; by default
 * warnings and errors go to stderr. EDGERUN_LOG=debug|info|warning|error in
 * the environment sets the default threshold. */
#ifndef ER_LOG_H
#define ER_LOG_H

#include "edgerun.h"

void er__log(er_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when a message at `level` would be delivered (to skip building it). */
bool er__log_enabled(er_log_level level);

#endif /* ER_LOG_H */
