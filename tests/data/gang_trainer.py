#!/usr/bin/python3
"""A stand-in for one worker of a multi-host training job, for tpud's gang tests.

Counts steps, saves a complete checkpoint every --save-every steps as an
orbax-style `<ckpt-dir>/<step>/` directory (written under a tmp name, then
renamed: complete only once renamed), and prints `step N` each step. With
--resume-step S it starts after step S and says `resumed from step S`.

Failure injection, through files in --control-dir (each consumed once):
  crash-w<ID>   exit 1 with a crash line at the next step
  oom-w<ID>     print an HBM out-of-memory error and exit 1 (deterministic)
  hang-w<ID>    stop printing and stop advancing (a stuck collective)
  deadline-w<ID> print a DeadlineExceededError and exit 1 (the TPU needs a reset)
It logs its worker id and gang generation from TPUD_WORKER_ID and
TPUD_GANG_GENERATION.
"""
import argparse
import os
import shutil
import sys
import time


def peers_alive(peers_dir, num_workers):
    for w in range(num_workers):
        try:
            with open(os.path.join(peers_dir, f"w{w}.pid")) as f:
                os.kill(int(f.read()), 0)
        except (OSError, ValueError):
            return False
    return True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--control-dir", required=True)
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--save-every", type=int, default=5)
    p.add_argument("--step-seconds", type=float, default=0.1)
    p.add_argument("--resume-step", type=int, default=None)
    p.add_argument("--peers-dir", help="a stuck collective: each step, block for good once a peer's "
                                       "process (its pid in PEERS_DIR/w<ID>.pid) is gone")
    p.add_argument("--num-workers", type=int, default=1)
    a = p.parse_args()
    worker = os.environ.get("TPUD_WORKER_ID", "?")
    generation = os.environ.get("TPUD_GANG_GENERATION", "?")
    os.makedirs(a.ckpt_dir, exist_ok=True)
    start = 0
    if a.resume_step is not None:
        start = a.resume_step
        print(f"worker {worker} generation {generation}: resumed from step {start}", flush=True)
    else:
        print(f"worker {worker} generation {generation}: from scratch", flush=True)
    if a.peers_dir:
        os.makedirs(a.peers_dir, exist_ok=True)
        with open(os.path.join(a.peers_dir, f"w{worker}.pid.tmp"), "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.path.join(a.peers_dir, f"w{worker}.pid.tmp"), os.path.join(a.peers_dir, f"w{worker}.pid"))
        while not peers_alive(a.peers_dir, a.num_workers):  # The connect barrier: every peer up.
            time.sleep(0.01)
    for step in range(start + 1, a.steps + 1):
        time.sleep(a.step_seconds)
        if a.peers_dir and not peers_alive(a.peers_dir, a.num_workers):
            while True:  # A collective with a dead peer never completes.
                time.sleep(3600)
        for kind in ("crash", "oom", "hang", "deadline"):
            marker = os.path.join(a.control_dir, f"{kind}-w{worker}")
            if not os.path.exists(marker):
                continue
            os.remove(marker)
            if kind == "crash":
                print(f"F1124 worker {worker}: Check failed: injected crash at step {step}", flush=True)
                sys.exit(1)
            if kind == "oom":
                print("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
                      "error. Ran out of memory in memory space hbm. Used 20.5G of 15.48G hbm.", flush=True)
                sys.exit(1)
            if kind == "deadline":
                print("tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded",
                      flush=True)
                sys.exit(1)
            while True:  # hang
                time.sleep(3600)
        print(f"step {step}", flush=True)
        if step % a.save_every == 0:
            tmp = os.path.join(a.ckpt_dir, f"{step}.orbax-checkpoint-tmp")
            os.makedirs(tmp, exist_ok=True)
            with open(os.path.join(tmp, "state"), "w") as f:
                f.write(str(step))
            final = os.path.join(a.ckpt_dir, str(step))
            if os.path.exists(final):  # Saved before a restart from an earlier step: replaced.
                shutil.rmtree(final)
            os.rename(tmp, final)
    print(f"worker {worker}: done", flush=True)


if __name__ == "__main__":
    main()
