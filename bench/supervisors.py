"""The two supervisors under test, driven the same way: tpud (with tpuctl) and
Debian's supervisord 4.2.5 (with its XML-RPC interface), each in its own temp
directory, plus what the benchmarks read off /proc about them.

/proc facts used (proc(5)): /proc/PID/task/TID/sched holds
`se.sum_exec_runtime` (milliseconds, ns precision) and
`nr_voluntary_switches` per thread; /proc/PID/status has VmRSS (kB);
/proc/PID/smaps_rollup has Pss (kB).
"""

import os
import signal
import socket
import subprocess
import time
import xmlrpc.client

SUPERVISORD = "/usr/bin/supervisord"
SUPERVISORCTL = "/usr/bin/supervisorctl"


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


# ---------------------------------------------------------------- /proc readings

def _threads(pid):
    try:
        return os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []


def _sched_fields(pid, tid):
    fields = {}
    try:
        with open(f"/proc/{pid}/task/{tid}/sched") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep:
                    fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_and_wakeups(pids):
    """(CPU seconds, voluntary context switches) summed over every thread of `pids`."""
    cpu, wakeups = 0.0, 0
    for pid in pids:
        for tid in _threads(pid):
            fields = _sched_fields(pid, tid)
            cpu += float(fields.get("se.sum_exec_runtime", 0.0)) / 1000.0
            wakeups += int(fields.get("nr_voluntary_switches", 0))
    return cpu, wakeups


def thread_count(pid):
    return len(_threads(pid))


def _status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def rss_mb(pid):
    return _status_kb(pid, "VmRSS") / 1024.0


def private_mb(pid):
    """Anonymous resident memory: what the process alone holds (no shared code)."""
    return _status_kb(pid, "RssAnon") / 1024.0


def pss_mb(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:  # Gone meanwhile (a crashing job's shim).
            pass
    return total / 1024.0


def processes_with_argv(prefix):
    """Pids whose argv starts with `prefix` (a list of strings)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv]
        if argv[:len(prefix)] == prefix:
            found.append(int(entry))
    return found


def _yaml_str(value):
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _yaml_list(values):
    return "[" + ", ".join(_yaml_str(v) for v in values) + "]"


# ---------------------------------------------------------------- tpud

class Tpud:
    """A tpud in `root` with the given jobs (dicts rendered to YAML).

    Each job dict: name, command (list), and optional keys copied verbatim as
    YAML (values given as YAML text), e.g. {"restart": "{max_restarts: 5}"}.
    """

    def __init__(self, bins, root, jobs, launcher="shim", extra_yaml=""):
        self.bins, self.root = bins, root
        self.socket = os.path.join(root, "tpud.sock")
        os.makedirs(os.path.join(root, "jobs.d"), exist_ok=True)
        lines = [
            f"socket: {_yaml_str(self.socket)}",
            f"state_dir: {_yaml_str(os.path.join(root, 'state'))}",
            f"log_dir: {_yaml_str(os.path.join(root, 'logs'))}",
            'metrics: { listen: "127.0.0.1:0" }',
            f"launcher: {launcher}",
            "stop_jobs_on_exit: true",
            f"jobs_dir: {_yaml_str(os.path.join(root, 'jobs.d'))}",
        ]
        if extra_yaml:
            lines.append(extra_yaml)
        self.config = os.path.join(root, "tpud.yaml")
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\njobs: []\n")
        for job in jobs:  # One file per job, as a jobs_dir holds them.
            body = [f"name: {job['name']}", f"command: {_yaml_list(job['command'])}"]
            body += [f"{key}: {value}" for key, value in job.items() if key not in ("name", "command")]
            with open(os.path.join(root, "jobs.d", job["name"] + ".yaml"), "w") as f:
                f.write("\n".join(body) + "\n")
        self.stderr_path = os.path.join(root, "tpud.stderr")
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([bins.tpud, "--config", self.config], stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=subprocess.STDOUT)
        wait_for(lambda: self.proc.poll() is not None or self.ctl("status", check=False).returncode == 0,
                 60, "tpud to answer")
        if self.proc.poll() is not None:
            raise RuntimeError(f"tpud exited {self.proc.returncode}: {open(self.stderr_path).read()}")

    @property
    def pid(self):
        return self.proc.pid

    def ctl(self, *args, check=True):
        result = subprocess.run([self.bins.tpuctl, "--socket", self.socket, *args],
                                capture_output=True, text=True)
        if check and result.returncode != 0:
            raise RuntimeError(f"tpuctl {' '.join(args)}: exit {result.returncode}: {result.stderr}")
        return result

    def shim_pids(self):
        return [pid for pid in processes_with_argv([self.bins.shim])
                if cmdline_contains(pid, self.root)]

    def log_path(self, job):
        return os.path.join(self.root, "logs", job + ".log")

    def stderr_text(self):
        with open(self.stderr_path) as f:
            return f.read()

    def close(self):
        terminate(self.proc)
        for pid in self.shim_pids():  # Nothing may outlive a benchmark.
            _kill_quietly(pid)


def terminate(proc):
    """SIGTERM, then SIGKILL after 60 s; waits for the exit."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cmdline_contains(pid, text):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False


def _kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- supervisord

class _UnixHTTPConnection(xmlrpc.client.http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


class _UnixTransport(xmlrpc.client.Transport):
    """XML-RPC over supervisord's unix socket, one persistent HTTP/1.1 connection."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def make_connection(self, host):
        if self._connection and host == self._connection[0]:
            return self._connection[1]
        self._connection = host, _UnixHTTPConnection(self.path)
        return self._connection[1]


class Supervisord:
    """supervisord -n in `root` with `programs`: name -> dict of [program:x] options."""

    def __init__(self, root, programs):
        self.root = root
        self.socket = os.path.join(root, "supervisor.sock")
        self.config = os.path.join(root, "supervisord.conf")
        lines = [
            "[supervisord]",
            f"logfile={root}/supervisord.log",
            f"pidfile={root}/supervisord.pid",
            f"childlogdir={root}",
            "nodaemon=true",
            "[unix_http_server]",
            f"file={self.socket}",
            "[rpcinterface:supervisor]",
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
            "[supervisorctl]",
            f"serverurl=unix://{self.socket}",
        ]
        for name, options in programs.items():
            lines.append(f"[program:{name}]")
            lines += [f"{key}={value}" for key, value in options.items()]
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([SUPERVISORD, "-n", "-c", self.config], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(self.socket) or self.proc.poll() is not None, 60,
                 "supervisord's socket")
        if self.proc.poll() is not None:
            raise RuntimeError(f"supervisord exited {self.proc.returncode}; see {root}/supervisord.log")
        self.rpc = xmlrpc.client.ServerProxy("http://localhost", transport=_UnixTransport(self.socket))
        wait_for(lambda: self._state() == "RUNNING", 60, "supervisord RUNNING")

    def _state(self):
        try:
            return self.rpc.supervisor.getState()["statename"]
        except (OSError, xmlrpc.client.Error):
            return None

    @property
    def pid(self):
        return self.proc.pid

    def ctl(self, *args):
        return subprocess.run([SUPERVISORCTL, "-c", self.config, *args], capture_output=True, text=True)

    def child_pids(self):
        return [info["pid"] for info in self.rpc.supervisor.getAllProcessInfo() if info["pid"]]

    def close(self):
        terminate(self.proc)
