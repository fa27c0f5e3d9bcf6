/* cmd-inspect-accel.c - the accelerator parts of `edgerun inspect`: the
 * per-node placement table for --backend, and the constraint report of a
 * target NPU profile for --target. */
#include <stdlib.h>
#include <string.h>

#include "backends/target.h"
#include "cli/cli.h"
#include "edgerun-backend.h"
#include "ir/ir.h"

static const char *or_dash(const char *s) { return s && s[0] ? s : "-"; }

int er_cli_inspect_placement(FILE *o, const er_model *m, const er_cli_backend *be, bool json) {
  er_session_options opts;
  er_session_options_init(&opts);
  er_cli_backend_apply(be, &opts);
  er_session *s;
  er_status st = er_session_create(m, &opts, &s);
  if (st != ER_STATUS_OK) return er_cli_fail_status("inspect", st, "placing the model's nodes");
  er_partition_summary sum;
  er_session_partition(s, &sum);
  bool warn = sum.fallback_share > ER_FALLBACK_WARN_SHARE;
  if (json) {
    fprintf(o, ",\n \"placement\": {\"preferred\": ");
    er_cli_json_string(o, sum.preferred);
    fprintf(o, ", \"fallback_nodes\": %zu, \"fallback_share\": %.6f, \"fallback_warning\": %s, "
               "\"total_macs\": %llu, \"fallback_macs\": %llu, \"segments\": %zu, \"transfers\": %zu, "
               "\"transfer_bytes\": %llu,\n  \"nodes\": [",
            sum.fallback_nodes, sum.fallback_share, warn ? "true" : "false",
            (unsigned long long)sum.total_macs, (unsigned long long)sum.fallback_macs, sum.segments,
            sum.transfers, (unsigned long long)sum.transfer_bytes);
    for (size_t i = 0; i < sum.node_count; i++) {
      er_placement p;
      er_session_placement(s, i, &p);
      fprintf(o, "%s\n   {\"index\": %zu, \"op\": ", i ? "," : "", i);
      er_cli_json_string(o, p.op_type);
      fprintf(o, ", \"name\": ");
      er_cli_json_string(o, p.node_name);
      fprintf(o, ", \"backend\": ");
      er_cli_json_string(o, p.backend);
      fprintf(o, ", \"segment\": %d, \"macs\": %llu, \"reason\": ", p.segment, (unsigned long long)p.macs);
      er_cli_json_string(o, p.reason);
      fprintf(o, "}");
    }
    fprintf(o, "],\n  \"transfer_list\": [");
    for (size_t i = 0; i < sum.transfers; i++) {
      er_transfer t;
      if (er_session_transfer(s, i, &t) != ER_STATUS_OK) break;
      fprintf(o, "%s\n   {\"value\": ", i ? "," : "");
      er_cli_json_string(o, t.value);
      fprintf(o, ", \"segment\": %d, \"backend\": ", t.segment);
      er_cli_json_string(o, t.backend);
      fprintf(o, ", \"direction\": \"%s\", \"bytes\": %llu}", t.to_device ? "to_device" : "to_host",
              (unsigned long long)t.bytes);
    }
    fprintf(o, "]}");
  } else {
    fprintf(o, "placement (preferred backend: %s):\n", sum.preferred);
    fprintf(o, "  %5s  %-20s %-24s %-8s %4s %14s  %s\n", "node", "op", "name", "backend", "seg", "MACs",
            "why not the preferred backend");
    for (size_t i = 0; i < sum.node_count; i++) {
      er_placement p;
      er_session_placement(s, i, &p);
      fprintf(o, "  %5zu  %-20s %-24.24s %-8s %4d %14llu  %s\n", i, p.op_type, or_dash(p.node_name), p.backend,
              p.segment, (unsigned long long)p.macs, or_dash(p.reason));
    }
    fprintf(o, "fallback:     %zu of %zu nodes on the CPU, %.1f%% of the compute (%llu of %llu MACs)\n",
            sum.fallback_nodes, sum.node_count, 100.0 * sum.fallback_share,
            (unsigned long long)sum.fallback_macs, (unsigned long long)sum.total_macs);
    fprintf(o, "segments:     %zu; %zu transfers between host and device per run (%llu bytes)\n",
            sum.segments, sum.transfers, (unsigned long long)sum.transfer_bytes);
    for (size_t i = 0; i < sum.transfers; i++) {
      er_transfer t;
      if (er_session_transfer(s, i, &t) != ER_STATUS_OK) break;
      fprintf(o, "  segment %-3d %-8s %s %-30s %12llu bytes\n", t.segment, t.backend,
              t.to_device ? "<- host  " : "-> host  ", t.value, (unsigned long long)t.bytes);
    }
    if (warn)
      fprintf(o, "WARNING: more than %.0f%% of the compute falls back to the CPU\n",
              100.0 * ER_FALLBACK_WARN_SHARE);
  }
  er_session_free(s);
  return 0;
}

int er_cli_inspect_target(FILE *o, const er_model *m, const char *profile, bool assume_quantized, bool json,
                          bool first, bool last) {
  er_target *t;
  er_status st = er__target_load(profile, &t);
  if (st != ER_STATUS_OK) return er_cli_fail_status("inspect", st, "--target");
  const er_graph *g = m->graph;
  er_violation *v = NULL;
  size_t n = 0;
  st = er__target_check(t, g, assume_quantized, &v, &n);
  if (st != ER_STATUS_OK) {
    er__target_free(t);
    return er_cli_fail_status("inspect", st, profile);
  }
  /* Nodes that would not run (advisory findings do not stop a node). */
  size_t blocked = 0;
  int32_t prev = -1;
  for (size_t i = 0; i < n; i++)
    if (!v[i].advisory && v[i].node != prev) {
      blocked++;
      prev = v[i].node;
    }
  if (json) {
    fprintf(o, "%s\n  {\"profile\": ", first ? ",\n \"targets\": [" : ",");
    er_cli_json_string(o, er__target_name(t));
    fprintf(o, ", \"title\": ");
    er_cli_json_string(o, er__target_title(t));
    fprintf(o, ", \"source\": ");
    er_cli_json_string(o, er__target_source(t));
    fprintf(o, ", \"assume_quantized\": %s, \"nodes\": %d, \"nodes_blocked\": %zu, \"violations\": [",
            assume_quantized ? "true" : "false", (int)g->n_nodes, blocked);
    for (size_t i = 0; i < n; i++) {
      const er_node *node = &g->nodes[v[i].node];
      fprintf(o, "%s\n   {\"node\": %d, \"op\": ", i ? "," : "", (int)v[i].node);
      er_cli_json_string(o, node->op_type);
      fprintf(o, ", \"name\": ");
      er_cli_json_string(o, node->name);
      fprintf(o, ", \"rule\": ");
      er_cli_json_string(o, v[i].rule);
      fprintf(o, ", \"advisory\": %s, \"detail\": ", v[i].advisory ? "true" : "false");
      er_cli_json_string(o, v[i].detail);
      fprintf(o, "}");
    }
    fprintf(o, "]}%s", last ? "]" : "");
  } else {
    fprintf(o, "target:       %s\n  source:     %s\n", er__target_title(t), er__target_source(t));
    fprintf(o, "  %zu of %d nodes would not run on it%s\n", blocked, (int)g->n_nodes, n ? ":" : "");
    for (size_t i = 0; i < n; i++) {
      const er_node *node = &g->nodes[v[i].node];
      fprintf(o, "  %5d  %-18s %-22.22s %-12s %s%s\n", (int)v[i].node, node->op_type, or_dash(node->name),
              v[i].rule, v[i].advisory ? "(slower) " : "", v[i].detail);
    }
    /* The same findings by rule, so a long list reads at a glance. */
    if (n) fprintf(o, "  by rule:");
    for (size_t i = 0; i < n; i++) {
      bool seen = false;
      for (size_t j = 0; j < i && !seen; j++) seen = strcmp(v[j].rule, v[i].rule) == 0;
      if (seen) continue;
      size_t count = 0;
      for (size_t j = i; j < n; j++) count += strcmp(v[j].rule, v[i].rule) == 0;
      fprintf(o, " %s %zu", v[i].rule, count);
    }
    if (n) fprintf(o, "\n");
    if (!assume_quantized)
      for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].rule, "dtype") == 0) {
          fprintf(o, "  (--assume-quantized judges the model as it will be once quantized to int8)\n");
          break;
        }
  }
  free(v);
  er__target_free(t);
  return 0;
}
