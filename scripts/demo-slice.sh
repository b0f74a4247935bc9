#!/usr/bin/env bash
# The multi-host demo (bash scripts/demo.sh --slice): a 4-worker slice on one
# machine. A real etcd on loopback, four tpuds (one per worker, each with its
# own socket, state and checkpoints), and the bundled PyTorch digits job as one
# gang (`gang: true`). One worker's trainer is killed with SIGKILL; every worker
# stops, and all four resume together from the newest step each of them holds,
# then finish with weights identical to an uninterrupted run.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
bash scripts/install-deps.sh
bash scripts/build.sh tpud tpuctl tpud-shim

TPUD="$REPO/build/daemon/tpud"
TPUCTL="$REPO/build/client/tpuctl"
WORKERS=4
DEMO="$(mktemp -d /tmp/tpud-slice-demo.XXXXXX)"
STEPS=600 CKPT_EVERY=50 STEP_SLEEP=0.03
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ctl() { local w=$1; shift; "$TPUCTL" --socket "$DEMO/w$w/tpud.sock" "$@"; }
field() { ctl "$1" status digits --json | python3 -c "import json,sys; print(json.load(sys.stdin)$2)"; }
all_are() {  # all_are PYTHON-FIELD VALUE: every worker's own status has it
  local w; for ((w = 0; w < WORKERS; w++)); do [ "$(field $w "$1")" = "$2" ] || return 1; done
}
wait_until() {  # wait_until SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what="$2"; shift 2
  until "$@" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then echo "demo: timed out waiting for $what" >&2; exit 1; fi
    sleep 0.3
  done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

say "Reference: the same training, uninterrupted, without tpud"
/usr/bin/python3 examples/digits/train.py --ckpt-dir "$DEMO/ref-ckpt" --steps $STEPS \
  --ckpt-every $CKPT_EVERY --result-file "$DEMO/reference.json" | tail -n 1

CLIENT_PORT=$(free_port) PEER_PORT=$(free_port)
say "Starting etcd on 127.0.0.1:$CLIENT_PORT (log $DEMO/etcd.log)"
etcd --name demo --data-dir "$DEMO/etcd" \
  --listen-client-urls "http://127.0.0.1:$CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-cluster "demo=http://127.0.0.1:$PEER_PORT" >"$DEMO/etcd.log" 2>&1 &
PIDS+=($!)
wait_until 20 "etcd" etcdctl --endpoints "127.0.0.1:$CLIENT_PORT" endpoint health

say "Starting $WORKERS tpuds, one per worker, with one gang job"
for ((w = 0; w < WORKERS; w++)); do
  mkdir -p "$DEMO/w$w"
  cat > "$DEMO/w$w/tpud.yaml" <<YAML
socket: $DEMO/w$w/tpud.sock
state_dir: $DEMO/w$w/state
log_dir: $DEMO/w$w/logs
metrics: { listen: "127.0.0.1:0" }
gce_metadata: { enabled: "false" }
slice:
  etcd: { endpoints: ["127.0.0.1:$CLIENT_PORT"], lease_seconds: 5 }
  name: demo-v4-32
  worker_id: $w
  num_workers: $WORKERS
jobs:
  - name: digits
    gang: true
    autostart: true
    command: ["/usr/bin/python3", "$REPO/examples/digits/train.py", "--ckpt-dir", "$DEMO/ckpt-{worker_id}",
              "--steps", "$STEPS", "--ckpt-every", "$CKPT_EVERY", "--step-sleep", "$STEP_SLEEP",
              "--result-file", "$DEMO/result-{worker_id}.json"]
    checkpoint: { dir: "$DEMO/ckpt-{worker_id}", layout: pattern, pattern: 'ckpt-(\d+)\.pt$' }
    resume_args: ["--resume-from", "{checkpoint}"]
    progress: { regex: '^step=(\d+)', restore_regex: '^restoring checkpoint', timeout_seconds: 600 }
    restart: { max_restarts: 3, backoff_initial_seconds: 1 }
    stop: { grace_seconds: 10 }
YAML
  "$TPUD" --config "$DEMO/w$w/tpud.yaml" 2>"$DEMO/w$w/tpud.log" &
  PIDS+=($!)
done
wait_until 60 "every worker running generation 1" all_are '["gang"]["phase"]' starting
wait_until 60 "every worker running" all_are '["state"]' running
ctl 0 slice
wait_until 90 "checkpoints at step 200 on every worker" \
  bash -c "for w in \$(seq 0 $((WORKERS - 1))); do test -e $DEMO/ckpt-\$w/ckpt-200.pt || exit 1; done"

PID=$(field 2 '["pid"]')
say "Killing worker 2's trainer (pid $PID) with SIGKILL mid-training"
kill -KILL "$PID"
wait_until 60 "every worker restarting in generation 2" all_are '["gang"]["generation"]' 2
wait_until 60 "every worker running again" all_are '["state"]' running
say "tpuctl status digits (on worker 0): the whole gang, one row per worker"
ctl 0 status digits | sed -n '/^gang/,$p'
say "Where each worker resumed from (its own checkpoint at the common step)"
for ((w = 0; w < WORKERS; w++)); do
  wait_until 30 "worker $w's resume line" grep -q "resuming from" "$DEMO/w$w/logs/digits.log"
  printf 'worker %d: %s\n' $w "$(grep -h 'resuming from' "$DEMO/w$w/logs/digits.log" | tail -n 1)"
done

say "Waiting for training to finish on every worker"
wait_until 240 "every worker to succeed" all_are '["state"]' succeeded

say "Result"
python3 - "$DEMO" $WORKERS <<'PY'
import json, sys
demo, workers = sys.argv[1], int(sys.argv[2])
ref = json.load(open(f"{demo}/reference.json"))
print(f"uninterrupted run : step={ref['step']} weights_sha256={ref['weights_sha256'][:16]}...")
ok = True
for w in range(workers):
    got = json.load(open(f"{demo}/result-{w}.json"))
    same = got["weights_sha256"] == ref["weights_sha256"]
    ok &= same
    print(f"worker {w}          : step={got['step']} weights_sha256={got['weights_sha256'][:16]}... "
          f"{'identical' if same else 'MISMATCH'}")
if not ok:
    sys.exit("MISMATCH: a worker did not reproduce the uninterrupted run")
print("identical: the gang stopped together, resumed together from a step every worker held, and finished "
      "exactly as if never interrupted")
PY
echo "(demo files kept in $DEMO)"
