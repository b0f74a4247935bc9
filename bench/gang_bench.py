#!/usr/bin/python3
"""Gang restart benchmark: how long from a failure on one worker until all N
workers run an attempt again, N = 2, 4, 8 tpuds on this machine.

- gang:  one tpud per worker with a `slice:` section and the job as `gang: true`
         (a real etcd on loopback). The failed worker's tpud proposes the next
         generation; every worker stops, reports, and starts together.
- alone: the same N tpuds without a slice, each job on its own. The trainers
         share a stuck collective (tests/data/gang_trainer.py --peers-dir): once a
         peer dies, the others block, and their tpuds only notice through the
         hang timeout (progress.timeout_seconds, HANG_TIMEOUT below).

Also: etcd requests and bytes per gang restart, from etcd's own /metrics
(grpc_server_handled_total, etcd_network_client_grpc_{received,sent}_bytes_total)
over the restart window (lease keepalives of every worker included).

Prints `name: value unit` lines. Usage: gang_bench.py [--build-dir build] [--workers 2,4,8]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER = os.path.join(REPO, "tests", "data", "gang_trainer.py")
HANG_TIMEOUT = 10  # seconds: the alone baseline's progress.timeout_seconds


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return
        except (subprocess.CalledProcessError, json.JSONDecodeError, KeyError, TypeError):
            pass
        time.sleep(0.02)
    sys.exit(f"gang_bench: timed out waiting for {what}")


class Etcd:
    def __init__(self, root):
        self.client, peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{self.client}"
        self.proc = subprocess.Popen(
            ["etcd", "--name", "bench", "--data-dir", os.path.join(root, "etcd"),
             "--listen-client-urls", f"http://{self.endpoint}", "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"bench=http://127.0.0.1:{peer}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait(lambda: subprocess.run(["etcdctl", "--endpoints", self.endpoint, "endpoint", "health"],
                                    capture_output=True).returncode == 0, 30, "etcd")

    def counters(self):
        text = urllib.request.urlopen(f"http://{self.endpoint}/metrics", timeout=5).read().decode()
        requests = received = sent = 0.0
        for line in text.splitlines():
            if line.startswith("grpc_server_handled_total{"):
                requests += float(line.rsplit(" ", 1)[1])
            elif line.startswith("etcd_network_client_grpc_received_bytes_total"):
                received += float(line.rsplit(" ", 1)[1])
            elif line.startswith("etcd_network_client_grpc_sent_bytes_total"):
                sent += float(line.rsplit(" ", 1)[1])
        return requests, received, sent

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Worker:
    def __init__(self, build, root, w, n, etcd):
        self.dir = os.path.join(root, f"w{w}")
        os.makedirs(self.dir)
        self.tpuctl = [os.path.join(build, "client", "tpuctl"), "--socket", os.path.join(self.dir, "tpud.sock")]
        command = ["/usr/bin/python3", TRAINER, "--ckpt-dir", os.path.join(root, f"ckpt-{w}"),
                   "--control-dir", os.path.join(root, "control"), "--step-seconds", "0.05",
                   "--peers-dir", os.path.join(root, "peers"), "--num-workers", str(n)]
        job = {"name": "train", "autostart": True, "command": command,
               "env": {"TPUD_WORKER_ID": str(w)},
               "checkpoint": {"dir": os.path.join(root, f"ckpt-{w}"), "layout": "orbax"},
               "resume_args": ["--resume-step", "{step}"],
               "progress": {"regex": "^step (\\d+)", "startup_grace_seconds": 5,
                            "timeout_seconds": HANG_TIMEOUT},
               "restart": {"backoff_initial_seconds": 0.1, "backoff_jitter": 0, "max_restarts": 10},
               "stop": {"grace_seconds": 1}}
        config = {"socket": os.path.join(self.dir, "tpud.sock"), "state_dir": os.path.join(self.dir, "state"),
                  "log_dir": os.path.join(self.dir, "logs"), "metrics": {"listen": ""},
                  "gce_metadata": {"enabled": "false"}, "stop_jobs_on_exit": True, "jobs": [job]}
        if etcd is not None:
            job["gang"] = True
            del job["env"]  # tpud sets TPUD_WORKER_ID for gang jobs.
            config["slice"] = {"etcd": {"endpoints": [etcd.endpoint], "lease_seconds": 5},
                               "name": "bench", "worker_id": w, "num_workers": n}
        with open(os.path.join(self.dir, "tpud.yaml"), "w") as f:
            json.dump(config, f)  # JSON is YAML.
        self.proc = subprocess.Popen([os.path.join(build, "daemon", "tpud"), "--config",
                                      os.path.join(self.dir, "tpud.yaml")],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "tpud.log"), "w"))

    def status(self):
        out = subprocess.run(self.tpuctl + ["status", "train", "--json"], capture_output=True, check=True, text=True)
        return json.loads(out.stdout)

    def attempt_started_ms(self, attempt):
        """When attempt `attempt` entered starting (unix ms), from tpuctl events."""
        out = subprocess.run(self.tpuctl + ["events", "train", "--json"], capture_output=True, check=True,
                             text=True).stdout
        for line in out.splitlines():
            event = json.loads(line)
            if event.get("type") == "transition" and event.get("to") == "starting" and event.get("attempt") == attempt:
                return event["time_unix_ms"]
        return None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run(build, n, gang):
    root = tempfile.mkdtemp(prefix="tpud-gang-bench-")
    os.makedirs(os.path.join(root, "control"))
    etcd = Etcd(root) if gang else None
    workers = [Worker(build, root, w, n, etcd) for w in range(n)]
    try:
        wait(lambda: all(w.status()["state"] == "running" and w.status()["last_step"] not in (None, -1) and
                         w.status()["last_step"] >= 10 for w in workers), 90, "every worker running")
        before = etcd.counters() if etcd else None
        victim = workers[0].status()["pid"]
        killed_ms = time.time() * 1000
        os.kill(victim, signal.SIGKILL)
        wait(lambda: all(w.attempt_started_ms(2) is not None for w in workers), 120, "every worker's attempt 2")
        started = [w.attempt_started_ms(2) for w in workers]
        seconds = (max(started) - killed_ms) / 1000
        if etcd:
            after = etcd.counters()
            return seconds, [a - b for a, b in zip(after, before)]
        return seconds, None
    finally:
        for w in workers:
            w.stop()
        if etcd:
            etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--workers", default="2,4,8")
    args = parser.parse_args()
    for n in [int(x) for x in args.workers.split(",")]:
        gang_seconds, etcd_delta = run(args.build_dir, n, gang=True)
        print(f"gang_restart_all_running_again{{workers={n},mode=gang}}: {gang_seconds:.2f} s", flush=True)
        requests, received, sent = etcd_delta
        print(f"gang_restart_etcd_requests{{workers={n}}}: {requests:.0f} requests", flush=True)
        print(f"gang_restart_etcd_bytes{{workers={n}}}: {received + sent:.0f} bytes", flush=True)
        alone_seconds, _ = run(args.build_dir, n, gang=False)
        print(f"gang_restart_all_running_again{{workers={n},mode=alone,hang_timeout={HANG_TIMEOUT}s}}: "
              f"{alone_seconds:.2f} s", flush=True)


if __name__ == "__main__":
    main()
