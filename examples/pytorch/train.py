"""A small data-parallel training program that survives restarts.

Every rank trains the same model (DistributedDataParallel over gloo, CPU)
on a regression task whose data it generates itself: the batch of a step
depends only on the step and the rank, so a run resumed from a checkpoint
sees exactly the data it would have seen without the failure.

Run it under torchrun (see jobset.yaml), or, in-process, one process per
rank (see jobset-in-process.yaml): inplace_restart.run forms the process
group and calls train() again at each epoch, in the same process, when
another rank failed. Its environment:

  TRAIN_STEPS          steps in all (default 300)
  CHECKPOINT_EVERY     steps between checkpoints (default 20)
  CHECKPOINT_DIR       where checkpoints go (default /checkpoints)
  STEP_SECONDS         extra time per step, standing in for a bigger model
                       (default 0.1)
  PG_TIMEOUT_SECONDS   how long a collective waits for a peer before it
                       fails (default 60; PyTorch's own is 30 minutes)
  NODE_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE
                       without torchrun: the rank is
                       NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK

It logs `step N loss X` once per step (local rank 0 of each Pod),
`saved checkpoint at step N` after each save, and, when it loads a
checkpoint, `rank R resumed from checkpoint at step N` on every rank.

`touch /tmp/inplace-crash` in a Pod's container makes one of its ranks exit
with code 1 at its next step; a number in the file is the exit code
instead, and a second number the local rank that exits (`42 1`). The rank
removes the file first, so one crash is one failure.
"""

import datetime
import os
import sys
import time

import inplace_restart
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

CRASH_FILE = "/tmp/inplace-crash"
FEATURES = 16
BATCH = 64
KEEP = 2  # checkpoints kept per rank: ranks may be one save apart


def env(name, default, kind=int):
    return kind(os.environ.get(name, default))


def log(msg):
    # One write per line: the ranks of a Pod share its stdout, and print()
    # writes the text and its newline apart, so two ranks' lines would mix.
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def checkpoint_path(directory, step):
    return os.path.join(directory, f"step-{step:08d}.pt")


def latest_step(directory):
    steps = [int(f[5:13]) for f in os.listdir(directory) if f.startswith("step-") and f.endswith(".pt")]
    return max(steps, default=0)


def save(directory, step, model, optimizer):
    # Written whole or not at all: a crash while saving leaves the previous
    # checkpoint, never half of this one.
    path = checkpoint_path(directory, step)
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    kept = sorted(f for f in os.listdir(directory) if f.startswith("step-") and f.endswith(".pt"))
    for old in kept[:-KEEP]:
        os.remove(os.path.join(directory, old))


def resume(directory, model, optimizer):
    """Loads the newest checkpoint every rank has and returns its step.

    A rank that crashed between two other ranks' saves is one checkpoint
    behind them: the ranks agree on the oldest of their newest steps, which
    every rank still keeps.
    """
    mine = torch.tensor([latest_step(directory)])
    dist.all_reduce(mine, op=dist.ReduceOp.MIN)
    step = int(mine.item())
    if step == 0:
        return 0
    state = torch.load(checkpoint_path(directory, step))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return step


def crash_requested():
    """Returns the exit code asked for in CRASH_FILE, or None."""
    try:
        with open(CRASH_FILE) as f:
            words = f.read().split()
    except FileNotFoundError:  # none, or another rank of this Pod took it
        return None
    try:
        code = int(words[0]) if words else 1
        local_rank = int(words[1]) if len(words) > 1 else None
    except ValueError:  # not numbers: a crash all the same
        log(f"{CRASH_FILE} holds {' '.join(words)!r}, not a code and a local rank: exit code 1")
        code, local_rank = 1, None
    if local_rank is not None and local_rank != int(os.environ.get("LOCAL_RANK", "0")):
        return None  # for another rank of this Pod
    try:
        os.remove(CRASH_FILE)
    except FileNotFoundError:  # another rank of this Pod took it
        return None
    return code


def train(epoch):
    """Trains from the newest checkpoint to the end, the process group
    formed (by inplace_restart.run: once, or once per epoch in-process)."""
    steps = env("TRAIN_STEPS", 300)
    every = env("CHECKPOINT_EVERY", 20)
    step_seconds = env("STEP_SECONDS", 0.1, float)
    rank, world = dist.get_rank(), dist.get_world_size()
    speaks = int(os.environ.get("LOCAL_RANK", "0")) == 0
    directory = os.path.join(os.environ.get("CHECKPOINT_DIR", "/checkpoints"), f"rank-{rank}")
    os.makedirs(directory, exist_ok=True)

    # Built again at each epoch: a rank that ran on in its process must
    # start where a new process does, from the checkpoint or from scratch.
    torch.manual_seed(0)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    target = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(1234))

    start = resume(directory, model, optimizer)
    if start > 0:
        log(f"rank {rank} resumed from checkpoint at step {start}")
    elif speaks:
        log(f"rank {rank} of {world} starts training")

    for step in range(start + 1, steps + 1):
        code = crash_requested()
        if code is not None:
            log(f"rank {rank} crashes with exit code {code} at step {step}, as {CRASH_FILE} asked")
            sys.exit(code)
        data = torch.Generator().manual_seed(step * world + rank)
        x = torch.randn(BATCH, FEATURES, generator=data)
        y = x @ target + 0.01 * torch.randn(BATCH, 1, generator=data)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # The loss over all ranks, so that every Pod logs the same value.
        total = loss.detach().clone()
        dist.all_reduce(total)
        if speaks:
            log(f"step {step} loss {total.item() / world:.6f}")
        if step % every == 0:
            save(directory, step, model, optimizer)
            if speaks:
                log(f"saved checkpoint at step {step}")
        time.sleep(step_seconds)

    dist.barrier()
    if speaks:
        log(f"training done at step {steps}")


def main():
    if "RANK" not in os.environ and "NODE_RANK" in os.environ:
        # One process per rank, without torchrun.
        local_world = env("LOCAL_WORLD_SIZE", 1)
        os.environ["RANK"] = str(env("NODE_RANK", 0) * local_world + env("LOCAL_RANK", 0))
    timeout = datetime.timedelta(seconds=env("PG_TIMEOUT_SECONDS", 60, float))
    inplace_restart.run(train, backend="gloo", timeout=timeout)


if __name__ == "__main__":
    main()
