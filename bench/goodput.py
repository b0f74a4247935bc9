"""Goodput under faults: the digits example (examples/digits/train.py) under a
fixed fault schedule, supervised by tpud and by supervisord, next to an
uninterrupted run and the theoretical best for the schedule.

Schedule (600 steps, a checkpoint every 50, 50 ms per step):
  crash        at step 130   SIGABRT; the last checkpoint is 100
  maintenance  at step 260   the metadata server's maintenance-event for
                             MAINTENANCE_SECONDS; the host is taken (the
                             trainer SIGKILLed) NOTICE_SECONDS after the
                             notice if it still runs
  deadline     at step 390   DeadlineExceededError until the node is stopped
                             and started through the Cloud TPU API emulator,
                             each operation taking --reset-seconds / 2
  hang         at step 520   no progress, deaf to SIGINT/SIGTERM

supervisord runs for the wall time tpud needed (or 3x the best, if tpud did
not finish), so its figures say how far it got in the same time.

Goodput is measured from the trainer's side (its --timeline), the same way for
both supervisors: useful time (what an uninterrupted run spends from its first
step to its last, prorated by the steps kept) / wall time (supervisor start
to the final step). tpud's own accounting (tpud_job_goodput_ratio and
tpud_job_badput_seconds, scraped from /metrics) is printed next to it.

Theoretical best wall time = uninterrupted wall + per fault: the steps since
the last checkpoint (none for the maintenance event, saved on notice) and one
more startup; plus the TPU reset for the deadline and the hang, the hang
timeout and the maintenance event's length.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from supervisors import Supervisord, Tpud, cmdline_contains, processes_with_argv, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(REPO, "examples", "digits", "train.py")
FIXTURES = os.path.join(REPO, "tests", "support")
PYTHON = "/usr/bin/python3"

STEPS, CKPT_EVERY, STEP_SLEEP = 600, 50, 0.05
FAULTS = [(130, "crash"), (260, "maintenance"), (390, "deadline"), (520, "hang")]
HANG_TIMEOUT = 5.0
NOTICE_SECONDS = 2.0
MAINTENANCE_SECONDS = 5.0
NODE = "projects/p/locations/z/nodes/n"


class Emulator:
    """One of tests/support' emulators, on port 0."""

    def __init__(self, script, *args):
        self.proc = subprocess.Popen([PYTHON, os.path.join(FIXTURES, script), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"{script}: no PORT line (got {line!r})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def get(self, path, headers=None):
        request = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.read().decode()

    def close(self):
        self.proc.terminate()
        self.proc.wait()


class Maintenance(threading.Thread):
    """The VM's side of a maintenance event: ends it after MAINTENANCE_SECONDS;
    if `take_host`, kills the trainer NOTICE_SECONDS after the notice, as the
    host going away would (a supervisor that saves on the notice is done by then)."""

    def __init__(self, metadata, ckpt_dir, take_host):
        super().__init__(daemon=True)
        self.metadata, self.ckpt_dir, self.take_host = metadata, ckpt_dir, take_host
        self.done = threading.Event()
        self.killed = False

    def event(self):
        return self.metadata.get("/computeMetadata/v1/instance/maintenance-event",
                                 {"Metadata-Flavor": "Google"}).strip()

    def run(self):
        while not self.done.is_set() and self.event() == "NONE":
            time.sleep(0.05)
        if self.done.is_set():
            return
        started = time.monotonic()
        if self.take_host:
            self.done.wait(NOTICE_SECONDS)
            for pid in trainer_pids(self.ckpt_dir):
                os.kill(pid, signal.SIGKILL)
                self.killed = True
        self.done.wait(max(0.0, MAINTENANCE_SECONDS - (time.monotonic() - started)))
        self.metadata.get("/_emulator/set?key=instance/maintenance-event&value=NONE")


def trainer_pids(ckpt_dir):
    return [pid for pid in processes_with_argv([PYTHON, TRAIN]) if cmdline_contains(pid, ckpt_dir)]


def read_timeline(path):
    events = []
    try:
        with open(path) as f:
            for line in f:
                events.append(json.loads(line))
    except FileNotFoundError:
        pass
    return events


def train_args(root, with_faults):
    args = [TRAIN, "--ckpt-dir", os.path.join(root, "ckpt"), "--steps", str(STEPS), "--ckpt-every",
            str(CKPT_EVERY), "--step-sleep", str(STEP_SLEEP), "--timeline", os.path.join(root, "timeline.jsonl")]
    if with_faults:
        args += ["--fault-schedule", os.path.join(root, "faults.json")]
    return args


def write_schedule(root, tpu, metadata):
    with open(os.path.join(root, "faults.json"), "w") as f:
        json.dump({"faults": [{"step": s, "fault": kind} for s, kind in FAULTS],
                   "tpu_control": tpu.url, "node": "n", "metadata": metadata.url}, f)


def summarize(events, started, cap_reached):
    """Ground truth from a timeline: wall, steps kept, lost steps and downtime per incident."""
    done = next((e["t"] for e in events if e["event"] == "done"), None)
    attempts = []  # [start event, last step, first step]
    for e in events:
        if e["event"] == "start":
            attempts.append({"start": e, "steps": []})
        elif e["event"] == "step" and attempts:
            attempts[-1]["steps"].append(e)
    incidents = []
    for previous, following in zip(attempts, attempts[1:]):
        reached = previous["steps"][-1]["step"] if previous["steps"] else previous["start"]["resume_step"]
        last_t = previous["steps"][-1]["t"] if previous["steps"] else previous["start"]["t"]
        first_t = following["steps"][0]["t"] if following["steps"] else None
        incidents.append({"steps_lost": max(0, reached - following["start"]["resume_step"]),
                          "downtime": (first_t - last_t) if first_t else None})
    checkpoints = [e["step"] for e in events if e["event"] == "checkpoint"]
    steps = [e["step"] for e in events if e["event"] == "step"]
    return {"wall": (done if done else time.monotonic()) - started, "done": done is not None,
            "kept_steps": STEPS if done else max(checkpoints, default=0), "incidents": incidents,
            "last_step": steps[-1] if steps else 0,
            "cap_reached": cap_reached}


def run_baseline(tmp):
    root = tempfile.mkdtemp(prefix="goodput-baseline-", dir=tmp)
    started = time.monotonic()
    subprocess.run([PYTHON, *train_args(root, False)], check=True, stdout=subprocess.DEVNULL)
    events = read_timeline(os.path.join(root, "timeline.jsonl"))
    first_step = next(e for e in events if e["event"] == "step")
    done = next(e["t"] for e in events if e["event"] == "done")
    shutil.rmtree(root, ignore_errors=True)
    return {"wall": done - started, "startup": first_step["t"] - started,
            "useful": done - first_step["t"], "step_time": (done - first_step["t"]) / (STEPS - first_step["step"])}


def tpud_yaml(tpu, metadata, root):
    return "\n".join([
        f'gce_metadata: {{enabled: "true", host: "{metadata.url[len("http://"):]}"}}',
        "tpu:",
        "  name: n", "  project: p", "  zone: z",
        f'  api_endpoint: "{tpu.url}"',
        f'  metadata_host: "{metadata.url[len("http://"):]}"',
        f'  device_globs: ["{root}/dev/accel*"]',
        f'  lock_file: "{root}/libtpu_lockfile"',
        # Resets 25 s apart are this schedule's, not a real job's: the default
        # 60 s spacing (against reset storms on real hardware) would dominate.
        "  reset: {backend: api, timeout_seconds: 120, poll_interval_seconds: 0.1, "
        "backoff_initial_seconds: 5, backoff_max_seconds: 10}",
    ])


def run_tpud(bins, tmp, cap, reset_seconds):
    root = tempfile.mkdtemp(prefix="goodput-tpud-", dir=tmp)
    metadata = Emulator("gce_metadata_emulator.py")
    tpu = Emulator("cloud_tpu_emulator.py", "--node", NODE, "--op-delay", str(reset_seconds / 2))
    write_schedule(root, tpu, metadata)
    job = {
        "name": "digits", "command": [PYTHON, *train_args(root, True)],
        "env": '{PYTHONUNBUFFERED: "1"}',
        "checkpoint": f'{{dir: "{root}/ckpt", layout: pattern, pattern: \'ckpt-(\\d+)\\.pt$\'}}',
        "resume_args": '["--resume-from", "{checkpoint}"]',
        "progress": f"{{regex: '^step=(\\d+)', restore_regex: '^restoring checkpoint', "
                    f"startup_grace_seconds: 60, timeout_seconds: {HANG_TIMEOUT}}}",
        "restart": "{max_restarts: 20, backoff_initial_seconds: 1, backoff_max_seconds: 1, backoff_jitter: 0}",
        "stop": "{grace_seconds: 1}",
    }
    maintenance = Maintenance(metadata, os.path.join(root, "ckpt"), take_host=True)
    tpud = None
    try:
        tpud = Tpud(bins, root, [job], extra_yaml=tpud_yaml(tpu, metadata, root))
        maintenance.start()
        started = time.monotonic()
        tpud.ctl("start", "digits")
        summary = _measure(root, started, cap, maintenance)
        summary["metrics"] = scrape_goodput(tpud)
        return summary
    finally:
        maintenance.done.set()
        if tpud:
            tpud.close()
        metadata.close()
        tpu.close()
        _remove(root)


def _remove(root):
    if os.environ.get("TPUD_BENCH_KEEP"):  # For a look at the logs afterwards.
        print(f"# kept {root}", flush=True)
    else:
        shutil.rmtree(root, ignore_errors=True)


def run_supervisord(tmp, cap, reset_seconds):
    root = tempfile.mkdtemp(prefix="goodput-supervisord-", dir=tmp)
    metadata = Emulator("gce_metadata_emulator.py")
    tpu = Emulator("cloud_tpu_emulator.py", "--node", NODE, "--op-delay", str(reset_seconds / 2))
    write_schedule(root, tpu, metadata)
    # What a supervisord user writes by hand: resume from the newest checkpoint.
    ckpt = os.path.join(root, "ckpt")
    command = " ".join(f"'{a}'" for a in [PYTHON, *train_args(root, True)])
    wrapper = os.path.join(root, "run.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f"latest=$(ls -v {ckpt}/ckpt-*.pt 2>/dev/null | tail -n 1)\n"
                f"exec {command} ${{latest:+--resume-from \"$latest\"}}\n")
    os.chmod(wrapper, 0o755)
    maintenance = Maintenance(metadata, ckpt, take_host=True)
    sup = None
    try:
        started = time.monotonic()
        sup = Supervisord(root, {"digits": {
            "command": wrapper, "autostart": "true", "autorestart": "true", "startsecs": 1,
            "startretries": 1000, "stopwaitsecs": 1, "environment": 'PYTHONUNBUFFERED="1"',
            "stdout_logfile": f"{root}/digits.log", "redirect_stderr": "true"}})
        maintenance.start()
        return _measure(root, started, cap, maintenance)
    finally:
        maintenance.done.set()
        if sup:
            sup.close()
        for pid in trainer_pids(ckpt):  # A hung trainer ignores supervisord's SIGTERM.
            os.kill(pid, signal.SIGKILL)
        metadata.close()
        tpu.close()
        _remove(root)


def _measure(root, started, cap, maintenance):
    """Waits for the run to finish (at most `cap` s after `started`) and sums it up."""
    timeline = os.path.join(root, "timeline.jsonl")
    finished = _wait_done(timeline, cap - (time.monotonic() - started))
    summary = summarize(read_timeline(timeline), started, not finished)
    summary["host_taken"] = maintenance.killed
    return summary


def _wait_done(timeline, timeout):
    try:
        wait_for(lambda: any(e["event"] == "done" for e in read_timeline(timeline)), max(1.0, timeout),
                 "the training run to finish")
        return True
    except TimeoutError:
        return False


def scrape_goodput(tpud):
    info = json.loads(tpud.ctl("info", "--json").stdout)
    with urllib.request.urlopen(f"http://{info['metrics_address']}/metrics", timeout=5) as response:
        text = response.read().decode()
    figures = {}
    for line in text.splitlines():
        m = re.match(r'tpud_job_goodput_ratio\{job="digits"\} (\S+)', line)
        if m:
            figures["ratio"] = float(m.group(1))
        m = re.match(r'tpud_job_productive_seconds\{job="digits"\} (\S+)', line)
        if m:
            figures["productive"] = float(m.group(1))
        m = re.match(r'tpud_job_badput_seconds\{cause="(\w+)",job="digits"\} (\S+)', line) or \
            re.match(r'tpud_job_badput_seconds\{job="digits",cause="(\w+)"\} (\S+)', line)
        if m:
            figures["badput_" + m.group(1)] = float(m.group(2))
    return figures


def best_wall(baseline, reset_seconds):
    # A fault at step s strikes before s completes: steps since the checkpoint up to s - 1 are lost.
    lost = sum((step - 1) % CKPT_EVERY for step, kind in FAULTS if kind != "maintenance")
    resets = sum(1 for _, kind in FAULTS if kind in ("deadline", "hang"))
    kinds = {kind for _, kind in FAULTS}
    return (baseline["wall"] + len(FAULTS) * baseline["startup"] + lost * baseline["step_time"] +
            resets * reset_seconds + (HANG_TIMEOUT if "hang" in kinds else 0) +
            (MAINTENANCE_SECONDS if "maintenance" in kinds else 0))


def run(bins, tmp, emit, note, quick, reset_seconds=4.0):
    global STEPS, FAULTS
    if quick:  # A smoke run: fewer steps, two faults.
        STEPS, FAULTS = 200, [(70, "crash"), (130, "deadline")]
    baseline = run_baseline(tmp)
    emit("goodput_uninterrupted_wall", baseline["wall"], "s")
    emit("goodput_uninterrupted_startup", baseline["startup"], "s")
    best = best_wall(baseline, reset_seconds)
    emit("goodput_best_wall", best, "s")
    emit("goodput_best_ratio", 100.0 * baseline["useful"] / best, "%")
    cap = 3.0 * best
    results = [("tpud", run_tpud(bins, tmp, cap, reset_seconds))]
    # supervisord gets the wall time tpud needed: how far does it get in it?
    if results[0][1]["done"]:
        cap = results[0][1]["wall"]
    results.append(("supervisord", run_supervisord(tmp, cap, reset_seconds)))
    for name, result in results:
        useful = baseline["step_time"] * result["kept_steps"] if not result["done"] else baseline["useful"]
        emit(f"goodput_{name}_finished", 1 if result["done"] else 0, "bool")
        emit(f"goodput_{name}_wall", result["wall"], "s")
        emit(f"goodput_{name}_steps_kept", result["kept_steps"], "steps")
        emit(f"goodput_{name}_ratio", 100.0 * useful / result["wall"], "%")
        emit(f"goodput_{name}_steps_lost", sum(i["steps_lost"] for i in result["incidents"]), "steps")
        if not result["done"]:
            emit(f"goodput_{name}_stuck_at_step", result["last_step"], "steps")
        for index, incident in enumerate(result["incidents"], 1):
            if incident["downtime"] is not None:  # None: the next attempt never got to a step.
                emit(f"goodput_{name}_incident{index}_downtime", incident["downtime"], "s")
        for key, value in sorted(result.get("metrics", {}).items()):
            unit = "" if key == "ratio" else "s"
            emit(f"goodput_tpud_metric_{key}", 100.0 * value if key == "ratio" else value,
                 "%" if key == "ratio" else unit)
    note(f"faults at steps {', '.join(f'{s} ({k})' for s, k in FAULTS)}; reset {reset_seconds:.1f} s, "
         f"hang timeout {HANG_TIMEOUT:.0f} s, maintenance {MAINTENANCE_SECONDS:.0f} s")
