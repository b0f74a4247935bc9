#!/usr/bin/python3
"""Example training job for tpud: a small MLP on sklearn's 8x8 digits, on CPU.

Deterministic end to end, so a run resumed from any checkpoint finishes with
bit-identical weights to an uninterrupted run (compare `weights_sha256`).
Checkpoints are `DIR/ckpt-<step>.pt`, written atomically (tmp file, fsync,
rename) and never deleted. See README.md for the flags and how tpud resumes it.

Exit codes: 0 done; 2 bad usage or unreadable checkpoint; 3 simulated failure
(--fail-at-step, first attempt only); 143 after SIGTERM; 130 after SIGINT (a
checkpoint at the current step is saved before either).
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import time

import torch
from sklearn.datasets import load_digits

from faults import FaultSchedule, Timeline

TEST_EXAMPLES = 360
HIDDEN_UNITS = 128
EXIT_USAGE = 2
EXIT_SIMULATED_FAILURE = 3
EXIT_FOR_SIGNAL = {signal.SIGTERM: 143, signal.SIGINT: 130}
TIMELINE = Timeline(None)  # --timeline sets its path.


def log(message):
    print(message, flush=True)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt-dir", required=True, help="where ckpt-<step>.pt files are written")
    parser.add_argument("--steps", type=int, default=600, help="total optimizer steps")
    parser.add_argument("--ckpt-every", type=int, default=50, help="save a checkpoint every K steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (momentum 0.9)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=10, help="print the loss every N steps")
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step")
    parser.add_argument("--resume-from", help="checkpoint file; default: $TPUD_CHECKPOINT when set")
    parser.add_argument("--fail-at-step", type=int, help="exit 3 at this step on attempt 1 ($TPUD_ATTEMPT)")
    parser.add_argument("--result-file", help="write a JSON summary here at the end")
    parser.add_argument("--fault-schedule", help="inject failures at steps (faults.py; for benchmarks)")
    parser.add_argument("--timeline", help="append JSON events (start, step, checkpoint, done) here")
    args = parser.parse_args(argv)
    for name in ("steps", "ckpt_every", "batch_size", "log_every"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    return args


class StopRequest:
    """Records SIGTERM/SIGINT; the training loop checks it between steps."""

    def __init__(self):
        self.signum = None
        for signum in EXIT_FOR_SIGNAL:
            signal.signal(signum, self._handle)

    def _handle(self, signum, _frame):
        if self.signum is None:
            self.signum = signum

    def exit_code(self):
        return EXIT_FOR_SIGNAL[self.signum]


def load_data(seed):
    """Returns (train_x, train_y, test_x, test_y); the split depends only on `seed`."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    test, train = order[:TEST_EXAMPLES], order[TEST_EXAMPLES:]
    return x[train], y[train], x[test], y[test]


def build_model(seed, lr):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, HIDDEN_UNITS), torch.nn.ReLU(), torch.nn.Linear(HIDDEN_UNITS, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return model, optimizer


class BatchOrder:
    """Minibatch indices for a 1-based step: a function of (seed, epoch) only."""

    def __init__(self, seed, examples, batch_size):
        self.seed, self.examples, self.batch_size = seed, examples, batch_size
        self.steps_per_epoch = max(1, examples // batch_size)  # Drops the last partial batch.
        self._epoch, self._perm = None, None

    def indices(self, step):
        epoch, slot = divmod(step - 1, self.steps_per_epoch)
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._epoch, self._perm = epoch, torch.randperm(self.examples, generator=generator)
        start = slot * self.batch_size
        return self._perm[start:start + self.batch_size]


def checkpoint_path(ckpt_dir, step):
    return os.path.join(ckpt_dir, f"ckpt-{step}.pt")


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(ckpt_dir, step, model, optimizer, args):
    """Writes ckpt-<step>.pt atomically: a reader sees the whole file or none."""
    path = checkpoint_path(ckpt_dir, step)
    state = {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "config": {"seed": args.seed, "batch_size": args.batch_size, "lr": args.lr},
    }
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(ckpt_dir)
    log(f"checkpoint saved step={step} path={os.path.abspath(path)}")
    TIMELINE.record("checkpoint", step=step)


def resume_path(args):
    if args.resume_from:
        return args.resume_from
    return os.environ.get("TPUD_CHECKPOINT") or None


def restore(path, model, optimizer, args):
    """Loads a checkpoint into model/optimizer/RNG; returns its step."""
    log(f"restoring checkpoint {os.path.abspath(path)}")
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    saved = state.get("config", {})
    current = {"seed": args.seed, "batch_size": args.batch_size, "lr": args.lr}
    if saved != current:
        print(f"warning: checkpoint config {saved} differs from {current}; "
              "the result will not match an uninterrupted run", file=sys.stderr, flush=True)
    return int(state["step"])


def first_attempt():
    return os.environ.get("TPUD_ATTEMPT", "") in ("", "1")


def sleep_unless_stopped(seconds, stop):
    deadline = time.monotonic() + seconds
    while stop.signum is None and (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(remaining, 0.05))


def train_step(model, optimizer, x, y):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def train(args, model, optimizer, data, start_step, stop, faults=None):
    """Runs steps start_step+1..args.steps; returns the exit code (0 when all ran)."""
    train_x, train_y = data[0], data[1]
    batches = BatchOrder(args.seed, len(train_y), args.batch_size)
    step = start_step  # Steps completed so far.
    while step < args.steps and stop.signum is None:
        if step + 1 == args.fail_at_step and first_attempt():
            print(f"simulated failure at step={step + 1} (--fail-at-step)", file=sys.stderr, flush=True)
            return EXIT_SIMULATED_FAILURE
        if faults:
            faults.before_step(step + 1, stop)
        idx = batches.indices(step + 1)
        loss = train_step(model, optimizer, train_x[idx], train_y[idx])
        step += 1
        TIMELINE.record("step", step=step)
        if step % args.log_every == 0 or step == args.steps:
            log(f"step={step} loss={loss:.4f}")
        if step % args.ckpt_every == 0 or step == args.steps:
            save_checkpoint(args.ckpt_dir, step, model, optimizer, args)
        sleep_unless_stopped(args.step_sleep, stop)
    if step < args.steps:  # Stopped by a signal; a finished run exits 0 regardless.
        return save_on_stop(args, model, optimizer, step, stop)
    return 0


def save_on_stop(args, model, optimizer, step, stop):
    log(f"received {signal.Signals(stop.signum).name}; stopping at step={step}")
    if not os.path.exists(checkpoint_path(args.ckpt_dir, step)):
        save_checkpoint(args.ckpt_dir, step, model, optimizer, args)
    return stop.exit_code()


def weights_sha256(model):
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def report(args, model, data):
    summary = {"step": args.steps, "accuracy": round(accuracy(model, data[2], data[3]), 4),
               "weights_sha256": weights_sha256(model)}
    log(f"final step={summary['step']} accuracy={summary['accuracy']:.4f} "
        f"weights_sha256={summary['weights_sha256']}")
    if args.result_file:
        with open(args.result_file, "w") as f:
            json.dump(summary, f)
            f.write("\n")


def main(argv):
    args = parse_args(argv)
    stop = StopRequest()
    TIMELINE.path = args.timeline
    faults = FaultSchedule(args.fault_schedule) if args.fault_schedule else None
    if faults:
        faults.check_environment()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    data = load_data(args.seed)
    model, optimizer = build_model(args.seed, args.lr)
    start_step = 0
    path = resume_path(args)
    if path:
        try:
            start_step = restore(path, model, optimizer, args)
        except (OSError, RuntimeError, KeyError) as e:
            print(f"cannot resume from {path}: {e}", file=sys.stderr, flush=True)
            return EXIT_USAGE
        log(f"resuming from {os.path.abspath(path)} at step={start_step}")
    else:
        log("starting fresh")
    TIMELINE.record("start", attempt=os.environ.get("TPUD_ATTEMPT"), resume_step=start_step)
    code = train(args, model, optimizer, data, start_step, stop, faults)
    if code == 0:
        report(args, model, data)
        TIMELINE.record("done")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
