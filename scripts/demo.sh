#!/usr/bin/env bash
# The main job: builds tpud, runs the bundled PyTorch training job under it,
# kills the trainer with SIGKILL mid-training, and shows tpud restart it from
# its newest checkpoint and finish with the same result as an uninterrupted run.
# Needs nothing installed system-wide beyond Debian packages (installed here).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# --slice: the multi-host demo, four workers as one gang (scripts/demo-slice.sh).
if [ "${1:-}" = "--slice" ]; then exec bash "$REPO/scripts/demo-slice.sh"; fi
cd "$REPO"
bash scripts/install-deps.sh
bash scripts/build.sh tpud tpuctl tpud-shim

TPUD="$REPO/build/daemon/tpud"
TPUCTL="$REPO/build/client/tpuctl"
DEMO="$(mktemp -d /tmp/tpud-demo.XXXXXX)"
export TPUD_SOCKET="$DEMO/run/tpud.sock"
STEPS=600 CKPT_EVERY=50 STEP_SLEEP=0.02
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
field() { "$TPUCTL" status digits --json | python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
field_is() { [ "$(field "$1")" = "$2" ]; }
wait_until() {  # wait_until SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what="$2"; shift 2
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then echo "demo: timed out waiting for $what" >&2; exit 1; fi
    sleep 0.2
  done
}

say "Reference: the same training, uninterrupted, without tpud"
/usr/bin/python3 examples/digits/train.py --ckpt-dir "$DEMO/ref-ckpt" --steps $STEPS \
  --ckpt-every $CKPT_EVERY --result-file "$DEMO/reference.json" | tail -n 1

cat > "$DEMO/tpud.yaml" <<YAML
socket: $DEMO/run/tpud.sock
state_dir: $DEMO/state
log_dir: $DEMO/logs
metrics: { listen: "127.0.0.1:0" }
jobs:
  - name: digits
    command: ["/usr/bin/python3", "$REPO/examples/digits/train.py", "--ckpt-dir", "$DEMO/ckpt",
              "--steps", "$STEPS", "--ckpt-every", "$CKPT_EVERY", "--step-sleep", "$STEP_SLEEP",
              "--result-file", "$DEMO/result.json"]
    checkpoint: { dir: $DEMO/ckpt, layout: pattern, pattern: 'ckpt-(\d+)\.pt$' }
    resume_args: ["--resume-from", "{checkpoint}"]
    progress: { regex: '^step=(\d+)', restore_regex: '^restoring checkpoint', timeout_seconds: 600 }
    restart: { max_restarts: 3, backoff_initial_seconds: 1 }
    stop: { grace_seconds: 10 }
YAML
say "Starting tpud (config $DEMO/tpud.yaml, daemon log $DEMO/tpud.log)"
"$TPUD" --config "$DEMO/tpud.yaml" 2>"$DEMO/tpud.log" &
TPUD_PID=$!
trap 'kill $TPUD_PID 2>/dev/null; wait $TPUD_PID 2>/dev/null || true' EXIT
wait_until 15 "tpud's socket" "$TPUCTL" status >/dev/null 2>&1

say "tpuctl start digits"
"$TPUCTL" start digits
wait_until 60 "a checkpoint at step 200" test -e "$DEMO/ckpt/ckpt-200.pt"
"$TPUCTL" status

PID=$(field '["pid"]')
say "Killing the trainer (pid $PID) with SIGKILL mid-training"
kill -KILL "$PID"
wait_until 30 "the restart" field_is '["attempt"]' 2
"$TPUCTL" status
say "tpuctl events digits"
"$TPUCTL" events digits
say "The new attempt's first lines (tpuctl logs digits)"
wait_until 30 "the resume line" grep -q "resuming from" "$DEMO/logs/digits.log"
"$TPUCTL" logs digits -n 10000 | grep -E "resuming from|starting fresh"

say "Waiting for training to finish"
wait_until 120 "the job to succeed" field_is '["state"]' succeeded
"$TPUCTL" status
"$TPUCTL" logs digits -n 1
# Where the wall time went (also tpud_job_goodput_ratio / tpud_job_badput_seconds in /metrics).
"$TPUCTL" status digits | grep '^goodput:'

say "Result"
python3 - "$DEMO/reference.json" "$DEMO/result.json" <<'PY'
import json, sys
ref, got = (json.load(open(p)) for p in sys.argv[1:3])
print(f"uninterrupted run : step={ref['step']} accuracy={ref['accuracy']} weights_sha256={ref['weights_sha256'][:16]}...")
print(f"killed + resumed  : step={got['step']} accuracy={got['accuracy']} weights_sha256={got['weights_sha256'][:16]}...")
if ref["weights_sha256"] != got["weights_sha256"]:
    sys.exit("MISMATCH: the resumed run did not reproduce the uninterrupted one")
print("identical: tpud resumed from the checkpoint and training finished exactly as if never killed")
PY
echo "(demo files kept in $DEMO)"
