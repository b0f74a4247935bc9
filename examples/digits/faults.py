"""Fault injection for the digits example: real failures at chosen steps, so a
supervisor can be measured against a fixed schedule (bench/goodput.py).

The schedule is a JSON file (train.py --fault-schedule FILE):

  {"faults": [{"step": 130, "fault": "crash"}, ...],
   "tpu_control": "http://127.0.0.1:PORT",   # Cloud TPU API emulator's test control
   "node": "n",
   "metadata": "http://127.0.0.1:PORT"}      # GCE metadata emulator

Each fault fires once, the first time any attempt reaches its step (FILE.fired
records which did), as what a TPU job would see:

  crash        abort(): SIGABRT, as libtpu's `Check failed` does
  hang         stop making progress and ignore SIGINT/SIGTERM, as a trainer
               stuck in a collective does
  deadline     mark the TPU node unhealthy (emulator) and die with
               DeadlineExceededError; every later attempt dies the same way at
               startup until the node has been stopped and started, as the
               Cloud TPU troubleshooting guide describes
  maintenance  raise the VM's maintenance-event (metadata emulator) and train
               on; a supervisor that watches the metadata stops it to save;
               while the event lasts, attempts fail to connect at startup

Without a schedule nothing here runs. Standard library only.
"""

import json
import os
import sys
import time
import urllib.request


class FaultSchedule:
    def __init__(self, path):
        self.path = path
        with open(path) as f:
            spec = json.load(f)
        self.faults = spec.get("faults", [])
        self.tpu_control = spec.get("tpu_control")
        self.node = spec.get("node", "n")
        self.metadata = spec.get("metadata")
        self.fired_path = path + ".fired"

    # ---------------------------------------------------------- at startup

    def check_environment(self):
        """Fails like a real trainer would when the TPU or host is unusable."""
        if self.metadata and self._maintenance_event() not in ("NONE", None):
            print("E0000 grpc: UNAVAILABLE: failed to connect to all addresses "
                  "(host under maintenance)", file=sys.stderr, flush=True)
            sys.exit(1)
        if self.tpu_control and self._node_health() not in ("HEALTHY", None):
            self._die_deadline_exceeded()

    # ---------------------------------------------------------- per step

    def before_step(self, step, stop):
        for index, fault in enumerate(self.faults):
            if fault["step"] == step and not self._fired(index):
                self._mark_fired(index)
                getattr(self, "_" + fault["fault"])(stop)

    def _crash(self, _stop):
        print(f"F0000 simulated crash (fault schedule)", file=sys.stderr, flush=True)
        os.abort()

    def _hang(self, stop):
        print("hanging (fault schedule): no more progress", file=sys.stderr, flush=True)
        while True:  # Deaf to SIGINT/SIGTERM: the stop ladder has to escalate.
            stop.signum = None
            time.sleep(0.1)

    def _deadline(self, _stop):
        self._control(f"{self.tpu_control}/_emulator/set_node?node={self.node}&health=TIMEOUT")
        self._die_deadline_exceeded()

    def _maintenance(self, _stop):
        self._control(f"{self.metadata}/_emulator/set?key=instance/maintenance-event"
                      "&value=TERMINATE_ON_HOST_MAINTENANCE")

    # ---------------------------------------------------------- helpers

    def _die_deadline_exceeded(self):
        # The error line from the Cloud TPU troubleshooting guide.
        print("tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded",
              file=sys.stderr, flush=True)
        sys.exit(1)

    def _fired(self, index):
        try:
            with open(self.fired_path) as f:
                return str(index) in f.read().split()
        except FileNotFoundError:
            return False

    def _mark_fired(self, index):
        with open(self.fired_path, "a") as f:
            f.write(f"{index}\n")
            f.flush()
            os.fsync(f.fileno())

    def _maintenance_event(self):
        request = urllib.request.Request(f"{self.metadata}/computeMetadata/v1/instance/maintenance-event",
                                         headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.read().decode().strip()
        except OSError:
            return None

    def _node_health(self):
        try:
            with urllib.request.urlopen(f"{self.tpu_control}/_emulator/node?node={self.node}",
                                        timeout=5) as response:
                return json.load(response).get("health")
        except OSError:
            return None

    @staticmethod
    def _control(url):
        with urllib.request.urlopen(url, timeout=5) as response:
            response.read()


class Timeline:
    """Appends one JSON object per event to a file (train.py --timeline):
    start (attempt, resume_step), step (step, after each one), checkpoint
    (step), done; each
    with `t`, time.monotonic() (CLOCK_MONOTONIC, shared by all processes)."""

    def __init__(self, path):
        self.path = path

    def record(self, event, **fields):
        if not self.path:
            return
        fields.update(event=event, t=time.monotonic(), pid=os.getpid())
        with open(self.path, "a") as f:
            f.write(json.dumps(fields) + "\n")
