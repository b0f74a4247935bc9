#!/usr/bin/python3
"""tpud against Debian's supervisord 4.2.5, side by side in one run.

Prints one `name: value unit` line per figure (README "Benchmarks" explains
each and what bounds it); values are numbers, lines starting with '#' are
notes. Sections, in order:

  restart   child exit -> replacement started, zero backoff, N restarts each
  idle      daemon CPU, wakeups and RSS over a window with 1 and 100 quiet jobs;
            daemon CPU while stopping a job that ignores SIGTERM
  logs      500 MB of 100-byte lines: into the job log vs `cat` relay vs a file
  control   status RPC latency (persistent client) and one CLI status process
  scale     1000 jobs under one tpud, 100 of them crashing every second
  goodput   the example training job under a fault schedule (bench/goodput.py)
  micro     the classifier and state store micro-benchmarks (their own lines)

Usage: run_bench.py --build-dir build [--only restart,logs] [--quick]
--quick shortens every section (for a smoke run); figures from it are not
the ones the README quotes.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import supervisors  # noqa: E402
from supervisors import Supervisord, Tpud, cpu_and_wakeups, pss_mb, rss_mb, wait_for  # noqa: E402

SECTIONS = ["restart", "idle", "logs", "control", "scale", "goodput", "micro"]
_print_lock = threading.Lock()


def emit(name, value, unit):
    if isinstance(value, float):
        value = f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    with _print_lock:
        print(f"{name}: {value} {unit}", flush=True)


def note(text):
    with _print_lock:
        print(f"# {text}", flush=True)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]


class Bins:
    def __init__(self, build_dir):
        build_dir = os.path.abspath(build_dir)
        self.tpud = os.path.join(build_dir, "daemon", "tpud")
        self.tpuctl = os.path.join(build_dir, "client", "tpuctl")
        self.shim = os.path.join(build_dir, "daemon", "tpud-shim")
        self.child = os.path.join(build_dir, "bench", "bench_child")
        self.control = os.path.join(build_dir, "bench", "tpud_bench_control")
        self.classifier = os.path.join(build_dir, "bench", "tpud_bench_classifier")
        self.state_store = os.path.join(build_dir, "bench", "tpud_bench_state_store")
        for path in vars(self).values():
            if not os.access(path, os.X_OK):
                sys.exit(f"run_bench.py: {path} is missing; build the `bench` target first")


class Scratch:
    """A temp dir per measurement, removed afterwards (logs there are ours)."""

    def __init__(self, parent, name):
        self.path = tempfile.mkdtemp(prefix=name + "-", dir=parent)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


# ---------------------------------------------------------------- restart latency

def read_restart_records(path):
    """Latencies (ms) from bench_child's start/exit records: exit[i] -> start[i+1]."""
    events = []
    with open(path) as f:
        for line in f:
            what, ns = line.split()
            events.append((what, int(ns)))
    latencies = []
    for (what, ns), (next_what, next_ns) in zip(events, events[1:]):
        if what == "exit" and next_what == "start":
            latencies.append((next_ns - ns) / 1e6)
    return latencies


def count_starts(path):
    try:
        with open(path) as f:
            return sum(1 for line in f if line.startswith("start"))
    except FileNotFoundError:
        return 0


def emit_latencies(prefix, latencies):
    emit(f"{prefix}_p50", percentile(latencies, 0.5), "ms")
    emit(f"{prefix}_p90", percentile(latencies, 0.9), "ms")
    emit(f"{prefix}_max", max(latencies), "ms")
    emit(f"{prefix}_samples", len(latencies), "restarts")


def tpud_restart_job(bins, record, lifetime_ms=None, name="restarter"):
    command = [bins.child, "restart", record] + ([str(lifetime_ms)] if lifetime_ms is not None else [])
    return {
        "name": name, "command": command, "start_seconds": 0,
        "restart": "{max_restarts: 1000000, backoff_initial_seconds: 0, backoff_max_seconds: 0, "
                   "backoff_jitter: 0}",
    }


def bench_restart_tpud(bins, tmp, restarts, launcher):
    with Scratch(tmp, f"restart-{launcher}") as root:
        record = os.path.join(root, "restarts.txt")
        tpud = Tpud(bins, root, [tpud_restart_job(bins, record)], launcher=launcher)
        try:
            tpud.ctl("start", "restarter")
            wait_for(lambda: count_starts(record) > restarts, 120, f"{restarts} restarts under tpud")
            tpud.ctl("stop", "restarter")
        finally:
            tpud.close()
        latencies = read_restart_records(record)[:restarts]
    suffix = "" if launcher == "shim" else "_" + launcher
    emit_latencies(f"restart_latency_tpud{suffix}", latencies)
    return percentile(latencies, 0.5)


def bench_restart_floor(bins, tmp, restarts):
    """The same restart latency with no supervisor: vfork+exec+wait in a loop."""
    with Scratch(tmp, "restart-floor") as root:
        record = os.path.join(root, "restarts.txt")
        subprocess.run([bins.child, "floor", record, str(restarts + 1)], check=True)
        latencies = read_restart_records(record)[:restarts]
    emit_latencies("restart_latency_floor", latencies)
    return percentile(latencies, 0.5)


def bench_restart_supervisord(bins, tmp, restarts):
    with Scratch(tmp, "restart-supervisord") as root:
        record = os.path.join(root, "restarts.txt")
        sup = Supervisord(root, {"restarter": {
            "command": f"{bins.child} restart {record}", "autostart": "true", "autorestart": "true",
            "startsecs": 0, "startretries": 1000000, "stdout_logfile": f"{root}/restarter.log",
            "redirect_stderr": "true"}})
        try:
            wait_for(lambda: count_starts(record) > restarts, 30 + 3 * restarts,
                     f"{restarts} restarts under supervisord")
        finally:
            sup.close()
        latencies = read_restart_records(record)[:restarts]
    emit_latencies("restart_latency_supervisord", latencies)


# ---------------------------------------------------------------- idle overhead

def quiet_jobs_tpud(bins, n):
    return [{"name": f"quiet{i}", "command": [bins.child, "quiet"], "autostart": "true"} for i in range(n)]


def quiet_programs_supervisord(bins, root, n):
    return {f"quiet{i}": {"command": f"{bins.child} quiet", "autostart": "true",
                          "stdout_logfile": f"{root}/quiet{i}.log", "redirect_stderr": "true"}
            for i in range(n)}


def tpud_states(tpud):
    """Job name -> state ("running", "succeeded", ...) from `tpuctl status --json`."""
    result = tpud.ctl("status", "--json", check=False)
    if result.returncode != 0:
        return {}
    return {job["name"]: job["state"] for job in json.loads(result.stdout)}


def all_running_tpud(tpud, n):
    return sum(1 for state in tpud_states(tpud).values() if state == "running") >= n


def bench_idle(bins, tmp, window):
    """All four daemons idle at once: each is measured by its own /proc counters."""
    roots, daemons = [], {}
    try:
        for n in (1, 100):
            root = tempfile.mkdtemp(prefix=f"idle-tpud-{n}-", dir=tmp)
            roots.append(root)
            daemons[("tpud", n)] = Tpud(bins, root, quiet_jobs_tpud(bins, n))
            root = tempfile.mkdtemp(prefix=f"idle-supervisord-{n}-", dir=tmp)
            roots.append(root)
            daemons[("supervisord", n)] = Supervisord(root, quiet_programs_supervisord(bins, root, n))
        for n in (1, 100):
            wait_for(lambda: all_running_tpud(daemons[("tpud", n)], n), 120, f"{n} tpud jobs RUNNING")
            sup = daemons[("supervisord", n)]
            wait_for(lambda: sum(1 for p in sup.rpc.supervisor.getAllProcessInfo()
                                 if p["statename"] == "RUNNING") >= n, 120, f"{n} supervisord jobs RUNNING")
        time.sleep(2)  # Let start-up work (RUNNING transitions, first writes) settle.
        before = {key: cpu_and_wakeups([d.pid]) for key, d in daemons.items()}
        shims_before = {n: cpu_and_wakeups(daemons[("tpud", n)].shim_pids()) for n in (1, 100)}
        time.sleep(window)
        for (kind, n), daemon in sorted(daemons.items()):
            cpu, wakeups = cpu_and_wakeups([daemon.pid])
            cpu -= before[(kind, n)][0]
            wakeups -= before[(kind, n)][1]
            emit(f"idle_{kind}_{n}_jobs_cpu", cpu * 1000.0, "ms")
            emit(f"idle_{kind}_{n}_jobs_cpu_share", 100.0 * cpu / window, "%core")
            emit(f"idle_{kind}_{n}_jobs_wakeups", wakeups / window, "per_s")
            emit(f"idle_{kind}_{n}_jobs_rss", rss_mb(daemon.pid), "MB")
            emit(f"idle_{kind}_{n}_jobs_rss_private", supervisors.private_mb(daemon.pid), "MB")
        for n in (1, 100):
            tpud = daemons[("tpud", n)]
            shims = tpud.shim_pids()
            cpu, wakeups = cpu_and_wakeups(shims)
            emit(f"idle_tpud_{n}_jobs_shims_cpu", (cpu - shims_before[n][0]) * 1000.0, "ms")
            emit(f"idle_tpud_{n}_jobs_shims_wakeups", (wakeups - shims_before[n][1]) / window, "per_s")
            emit(f"idle_tpud_{n}_jobs_shims_pss", pss_mb(shims), "MB")
    finally:
        for daemon in daemons.values():
            daemon.close()
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def bench_stop_ignoring_sigterm(bins, tmp, grace):
    """CPU the supervisor burns while a job ignores SIGTERM for `grace` seconds."""
    with Scratch(tmp, "stop-tpud") as root:
        ready = os.path.join(root, "ready.txt")
        tpud = Tpud(bins, root, [{
            "name": "stubborn", "command": [bins.child, "ignore-term", ready],
            "stop": f"{{grace_seconds: {grace}, signals: [SIGTERM, SIGKILL]}}"}])
        try:
            tpud.ctl("start", "stubborn")
            wait_for(lambda: os.path.exists(ready), 30, "the stubborn job to start")
            pids = [tpud.pid] + tpud.shim_pids()
            child = supervisors.processes_with_argv([bins.child, "ignore-term", ready])
            before = cpu_and_wakeups(pids)
            started = time.monotonic()
            tpud.ctl("stop", "stubborn")
            # Watch /proc, not tpud: every status RPC would cost tpud CPU.
            wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in child), grace + 30,
                     "the stubborn job to stop")
            elapsed = time.monotonic() - started
            time.sleep(0.2)  # The shim hands the exit over; tpud records it.
            cpu = cpu_and_wakeups(pids)[0] - before[0]
        finally:
            tpud.close()
    emit("stop_sigterm_ignored_tpud_cpu", cpu * 1000.0, "ms")
    emit("stop_sigterm_ignored_tpud_wall", elapsed, "s")
    with Scratch(tmp, "stop-supervisord") as root:
        ready = os.path.join(root, "ready.txt")
        sup = Supervisord(root, {"stubborn": {
            "command": f"{bins.child} ignore-term {ready}", "autostart": "true", "stopwaitsecs": grace,
            "stdout_logfile": f"{root}/stubborn.log", "redirect_stderr": "true"}})
        try:
            wait_for(lambda: os.path.exists(ready), 30, "the stubborn job to start")
            before = cpu_and_wakeups([sup.pid])
            started = time.monotonic()
            sup.rpc.supervisor.stopProcess("stubborn")  # Returns once the process has stopped.
            elapsed = time.monotonic() - started
            cpu = cpu_and_wakeups([sup.pid])[0] - before[0]
        finally:
            sup.close()
    emit("stop_sigterm_ignored_supervisord_cpu", cpu * 1000.0, "ms")
    emit("stop_sigterm_ignored_supervisord_wall", elapsed, "s")


# ---------------------------------------------------------------- log throughput

def wait_for_size(path, size, timeout):
    """Polls every millisecond; returns the monotonic time `path` reached `size` bytes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.stat(path).st_size >= size:
                return time.monotonic()
        except FileNotFoundError:
            pass
        time.sleep(0.001)
    raise TimeoutError(f"{path} did not reach {size} bytes in {timeout}s")


def bench_logs(bins, tmp, total_bytes, rounds):
    """Each way `rounds` times, interleaved; the median of each is reported."""
    samples = {name: [] for name in ("file", "cat", "tpud", "supervisord", "classified")}
    for _ in range(rounds):
        for name, value in bench_logs_once(bins, tmp, total_bytes).items():
            samples[name].append(value)
    results = {name: statistics.median(values) for name, values in samples.items()}
    for name in ("file", "cat", "tpud", "supervisord"):
        emit(f"log_throughput_{name}", results[name] / 1e9, "GB/s")
    emit("log_throughput_tpud_vs_cat", 100.0 * results["tpud"] / results["cat"], "%")
    emit("log_throughput_supervisord_vs_cat", 100.0 * results["supervisord"] / results["cat"], "%")
    # The shim writes the log; the classifier in tpud reads a bounded stream of
    # the same bytes and, when output outruns it, skips some (never the last).
    emit("log_tpud_classified_share", results["classified"], "%")


def bench_logs_once(bins, tmp, total_bytes):
    results = {}
    timeout = 60 + total_bytes / 20e6

    def run_shell(name, command_for_file):
        with Scratch(tmp, f"logs-{name}") as root:
            out = os.path.join(root, "out.log")
            started = time.monotonic()
            subprocess.run(["/bin/sh", "-c", command_for_file(out)], check=True)
            results[name] = total_bytes / (wait_for_size(out, total_bytes, timeout) - started)

    flood = f"{bins.child} flood {total_bytes}"
    run_shell("file", lambda out: f"{flood} > {out}")
    run_shell("cat", lambda out: f"{flood} | cat > {out}")

    with Scratch(tmp, "logs-tpud") as root:
        tpud = Tpud(bins, root, [{"name": "flood", "command": [bins.child, "flood", str(total_bytes)],
                                  "log": "{max_bytes: 100GB, backups: 1}"}])
        try:
            started = time.monotonic()
            tpud.ctl("start", "flood")
            results["tpud"] = total_bytes / (wait_for_size(tpud.log_path("flood"), total_bytes, timeout) - started)
            wait_for(lambda: tpud_states(tpud).get("flood") == "succeeded", timeout, "the flood job to end")
            dropped = sum(int(line.split(" bytes of output were not streamed")[0].rsplit(" ", 1)[-1])
                          for line in tpud.stderr_text().splitlines() if "bytes of output were not streamed" in line
                          and "attempt" in line)
        finally:
            tpud.close()
    with Scratch(tmp, "logs-supervisord") as root:
        log = os.path.join(root, "flood.log")
        sup = Supervisord(root, {"flood": {
            "command": f"{bins.child} flood {total_bytes}", "autostart": "false", "autorestart": "false",
            "startsecs": 0, "stdout_logfile": log, "stdout_logfile_maxbytes": 0, "redirect_stderr": "true"}})
        try:
            started = time.monotonic()
            sup.rpc.supervisor.startProcess("flood", False)
            results["supervisord"] = total_bytes / (wait_for_size(log, total_bytes, timeout) - started)
        finally:
            sup.close()
    results["classified"] = 100.0 * (total_bytes - dropped) / total_bytes
    return results


# ---------------------------------------------------------------- control latency

def timed_runs(command, runs):
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append((time.monotonic() - started) * 1000.0)
    return times


def bench_control(bins, tmp, rpcs, cli_runs):
    with Scratch(tmp, "control-tpud") as root:
        tpud = Tpud(bins, root, quiet_jobs_tpud(bins, 1))
        try:
            wait_for(lambda: all_running_tpud(tpud, 1), 30, "the job RUNNING")
            out = subprocess.run([bins.control, tpud.socket, str(rpcs), "quiet0"], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                name, value, unit = line.replace(":", "").split()
                emit(name.replace("control_rpc", "control_status_rpc_tpud"), float(value), unit)
            times = timed_runs([bins.tpuctl, "--socket", tpud.socket, "status"], cli_runs)
            emit("control_cli_status_tpud_p50", statistics.median(times), "ms")
        finally:
            tpud.close()
    with Scratch(tmp, "control-supervisord") as root:
        sup = Supervisord(root, quiet_programs_supervisord(bins, root, 1))
        try:
            for _ in range(100):
                sup.rpc.supervisor.getProcessInfo("quiet0")
            times = []
            for _ in range(max(200, rpcs // 10)):
                started = time.perf_counter()
                sup.rpc.supervisor.getProcessInfo("quiet0")
                times.append((time.perf_counter() - started) * 1000.0)
            emit("control_status_rpc_supervisord_p50", percentile(times, 0.5), "ms")
            emit("control_status_rpc_supervisord_p99", percentile(times, 0.99), "ms")
            times = timed_runs([supervisors.SUPERVISORCTL, "-c", sup.config, "status"], max(3, cli_runs // 10))
            emit("control_cli_status_supervisord_p50", statistics.median(times), "ms")
        finally:
            sup.close()


# ---------------------------------------------------------------- scale

def bench_scale(bins, tmp, jobs, crashing, window):
    with Scratch(tmp, "scale") as root:
        records = [os.path.join(root, f"crash{i}.txt") for i in range(crashing)]
        spec = quiet_jobs_tpud(bins, jobs - crashing)
        for i, record in enumerate(records):
            job = tpud_restart_job(bins, record, lifetime_ms=1000, name=f"crash{i}")
            job["autostart"] = "true"
            spec.append(job)
        started = time.monotonic()
        tpud = Tpud(bins, root, spec)
        try:
            wait_for(lambda: all_running_tpud(tpud, jobs - crashing), 600, f"{jobs} jobs up")
            emit(f"scale_{jobs}_jobs_startup", time.monotonic() - started, "s")
            marks = {r: count_starts(r) for r in records}
            before = cpu_and_wakeups([tpud.pid])
            time.sleep(window)
            cpu = cpu_and_wakeups([tpud.pid])[0] - before[0]
            latencies = []
            for record in records:  # Only restarts that happened inside the window.
                latencies += read_restart_records(record)[max(0, marks[record] - 1):]
            out = subprocess.run([bins.control, tpud.socket, "200"], check=True, capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                name, value, unit = line.replace(":", "").split()
                emit(name.replace("control_rpc", f"scale_{jobs}_jobs_status_all_rpc"), float(value), unit)
            times = timed_runs([bins.tpuctl, "--socket", tpud.socket, "status"], 5)
            emit(f"scale_{jobs}_jobs_cli_status", statistics.median(times), "ms")
            emit(f"scale_{jobs}_jobs_tpud_rss", rss_mb(tpud.pid), "MB")
            emit(f"scale_{jobs}_jobs_tpud_rss_private", supervisors.private_mb(tpud.pid), "MB")
            emit(f"scale_{jobs}_jobs_shims_pss", pss_mb(tpud.shim_pids()), "MB")
            emit(f"scale_{jobs}_jobs_crash_rate", len(latencies) / window, "restarts_per_s")
            emit(f"scale_{jobs}_jobs_tpud_cpu_share", 100.0 * cpu / window, "%core")
            emit_latencies(f"scale_{jobs}_jobs_restart_latency", latencies)
        finally:
            tpud.close()


# ---------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--quick", action="store_true", help="short smoke run; not the README figures")
    parser.add_argument("--tmp", default=None, help="scratch parent directory (default: $TMPDIR)")
    args = parser.parse_args()
    only = args.only.split(",")
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        parser.error(f"--only: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    bins = Bins(args.build_dir)
    quick = args.quick
    restarts = 20 if quick else 200
    tmp = tempfile.mkdtemp(prefix="tpud-bench-", dir=args.tmp)
    started = time.monotonic()
    note(f"tpud vs supervisord {supervisor_version()}; {os.cpu_count()} cores; scratch {tmp}")
    try:
        supervisord_restarts = None
        if "restart" in only:
            floor = bench_restart_floor(bins, tmp, restarts)
            for launcher in ("shim", "local"):
                p50 = bench_restart_tpud(bins, tmp, restarts, launcher)
                suffix = "" if launcher == "shim" else "_" + launcher
                emit(f"restart_latency_tpud{suffix}_over_floor", p50 / floor, "x (p50 / bare vfork+exec+wait p50)")
            # supervisord needs about a second per restart (its poll tick): it runs
            # alongside the sections that measure CPU counters, not latency.
            supervisord_restarts = threading.Thread(
                target=bench_restart_supervisord, args=(bins, tmp, restarts), daemon=True)
            supervisord_restarts.start()
        if "idle" in only:
            bench_idle(bins, tmp, 5 if quick else 60)
            bench_stop_ignoring_sigterm(bins, tmp, 2 if quick else 10)
        if "goodput" in only:
            import goodput
            goodput.run(bins, tmp, emit, note, quick)
        if supervisord_restarts is not None:
            supervisord_restarts.join()
        if "logs" in only:
            bench_logs(bins, tmp, (50 if quick else 500) * 1000 * 1000, 1 if quick else 3)
        if "control" in only:
            bench_control(bins, tmp, 2000 if quick else 20000, 10 if quick else 50)
        if "scale" in only:
            bench_scale(bins, tmp, 100 if quick else 1000, 10 if quick else 100, 5 if quick else 10)
        if "micro" in only:
            for program in (bins.classifier, bins.state_store):
                out = subprocess.run([program], check=True, capture_output=True, text=True, cwd=tmp).stdout
                for line in out.splitlines():
                    with _print_lock:
                        print(line, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    emit("bench_wall_time", time.monotonic() - started, "s")


def supervisor_version():
    try:
        return subprocess.run([supervisors.SUPERVISORD, "--version"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        sys.exit("run_bench.py: supervisord is not installed (apt-get install -y supervisor)")


if __name__ == "__main__":
    main()
