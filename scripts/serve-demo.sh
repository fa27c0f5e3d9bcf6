#!/usr/bin/env bash
# Starts `edgerun serve` on the bundled digits model, waits until it is
# ready, sends one inference request, shows the answer, and stops it with
# SIGTERM (a clean drain exits 0). PORT overrides 8080.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8080}
build/edgerun serve --repo models/repo --listen "127.0.0.1:$PORT" --poll-seconds 0 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/v2/health/ready")" = 200 ] && break
  kill -0 $pid 2>/dev/null || { echo "serve-demo: the server exited"; exit 1; }
  sleep 0.1
done
echo "ready: http://127.0.0.1:$PORT/ (status page)"
curl -s "localhost:$PORT/v2/models/digits/infer" -d @models/repo/digits/sample-request.json
echo
kill -TERM $pid
trap - EXIT
wait $pid
echo "serve-demo: the service drained and exited 0"
