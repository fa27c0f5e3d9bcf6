/* test-abi.c - the plugin ABI 1.0 is frozen: these are the offsets and
 * sizes a plugin built against 1.0 relies on (LP64: x86_64, aarch64).
 * A failing assertion here means the ABI changed: bump
 * ER_PLUGIN_ABI_MAJOR, or append the new member at the end instead. */
#include <stddef.h>
#include <stdio.h>

#include "edgerun-backend.h"

#if defined(__LP64__)
#define AT(type, member, off) _Static_assert(offsetof(type, member) == (off), #type "." #member " moved")
#define SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " changed size")

SIZE(er_device_desc, 280);
AT(er_device_desc, vendor, 128);
AT(er_device_desc, driver, 192);
AT(er_device_desc, kind, 256);
AT(er_device_desc, memory_bytes, 264);
AT(er_device_desc, compute_units, 272);

SIZE(er_subgraph, 56);
AT(er_subgraph, nodes, 8);
AT(er_subgraph, n_nodes, 16);
AT(er_subgraph, inputs, 24);
AT(er_subgraph, outputs, 40);
AT(er_subgraph, n_outputs, 48);

AT(er_backend_plugin, struct_size, 4);
AT(er_backend_plugin, name, 8);
AT(er_backend_plugin, user, 16);
AT(er_backend_plugin, device_count, 24);
AT(er_backend_plugin, device_desc, 32);
AT(er_backend_plugin, supports_op, 40);
AT(er_backend_plugin, compile, 48);
AT(er_backend_plugin, compute, 56);
AT(er_backend_plugin, release, 64);
AT(er_backend_plugin, destroy, 72);
SIZE(er_backend_plugin, 80);

AT(er_custom_op, domain, 8);
AT(er_custom_op, op_type, 16);
AT(er_custom_op, backend, 24);
AT(er_custom_op, min_version, 32);
AT(er_custom_op, min_inputs, 40);
AT(er_custom_op, min_outputs, 48);
AT(er_custom_op, infer, 56);
AT(er_custom_op, compute, 64);
AT(er_custom_op, user, 72);
SIZE(er_custom_op, 80);

/* The host table: members keep their order; new ones go at the end. */
AT(er_host_api, set_error, 8);
AT(er_host_api, log, 16);
AT(er_host_api, tensor_dtype, 24);
AT(er_host_api, dtype_name, 88);
AT(er_host_api, graph_node_count, 96);
AT(er_host_api, graph_value_constant, 128);
AT(er_host_api, node_op_type, 136);
AT(er_host_api, node_attr_floats, 232);
AT(er_host_api, frame_value, 240);
AT(er_host_api, frame_output, 248);
AT(er_host_api, custom_op_register, 256);
AT(er_host_api, kernel_node, 312);
SIZE(er_host_api, 320);
#endif

int main(void) {
  /* The version macros encode major.minor as the loader reads them. */
  int ok = ER_PLUGIN_ABI_MAJOR_OF(ER_PLUGIN_ABI_VERSION) == ER_PLUGIN_ABI_MAJOR &&
           ER_PLUGIN_ABI_MINOR_OF(ER_PLUGIN_ABI_VERSION) == ER_PLUGIN_ABI_MINOR && ER_PLUGIN_ABI_MAJOR == 1;
  printf("%d passed, %d failed\n", ok, !ok);
  return ok ? 0 : 1;
}
