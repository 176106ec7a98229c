#!/usr/bin/env bash
# A Dask cluster on this machine from the command line, for `zv ... --scheduler-file`:
# one scheduler and WORKERS single-threaded worker processes, configured by
# deploy/dask.yaml.  Jobs submitted with --detach keep running after `zv` returns.
#
#   deploy/local/cluster.sh start [WORKERS] [MEMORY_PER_WORKER]   # prints the scheduler file
#   zv build points in.parquet out.zv --scheduler-file .dask-cluster/scheduler.json
#   deploy/local/cluster.sh stop
#
# ZV_CLUSTER_DIR (default ./.dask-cluster) holds the scheduler file, pids and logs.
set -euo pipefail
deploy="$(cd "$(dirname "$0")/.." && pwd)"
dir="${ZV_CLUSTER_DIR:-$PWD/.dask-cluster}"
export DASK_CONFIG="$deploy"

stop() {
  for role in workers scheduler; do
    if [ -f "$dir/$role.pid" ]; then
      kill "$(cat "$dir/$role.pid")" 2>/dev/null || true
      rm -f "$dir/$role.pid"
    fi
  done
  rm -f "$dir/scheduler.json"
}

case "${1:-}" in
  start)
    workers="${2:-$(nproc)}"
    memory="${3:-auto}"
    mkdir -p "$dir"
    stop
    dask scheduler --scheduler-file "$dir/scheduler.json" --port 0 --dashboard-address :0 \
      >"$dir/scheduler.log" 2>&1 &
    echo $! >"$dir/scheduler.pid"
    for _ in $(seq 300); do [ -s "$dir/scheduler.json" ] && break; sleep 0.1; done
    [ -s "$dir/scheduler.json" ] || { echo "scheduler did not start; see $dir/scheduler.log" >&2; stop; exit 1; }
    dask worker --scheduler-file "$dir/scheduler.json" --nworkers "$workers" --nthreads 1 \
      --memory-limit "$memory" >"$dir/workers.log" 2>&1 &
    echo $! >"$dir/workers.pid"
    if ! python -c "import sys; from distributed import Client; \
Client(scheduler_file=sys.argv[1], timeout=60).wait_for_workers(int(sys.argv[2]), timeout=120)" \
        "$dir/scheduler.json" "$workers"; then
      echo "workers did not start; see $dir/workers.log" >&2
      stop
      exit 1
    fi
    echo "$dir/scheduler.json"
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: $0 start [WORKERS] [MEMORY_PER_WORKER] | stop" >&2
    exit 2
    ;;
esac
