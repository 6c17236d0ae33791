"""A worker of in-process scope for the supervisor's tests: python/inplace_restart.run
around a train() that logs and sleeps, with a stand-in for torch.distributed
that logs what run() asks of it (the tests run where torch is not).

It writes to $DIR/log: "start <epoch> <pid>" when train() begins, "over
<epoch>" when EpochOver interrupts it, "init"/"destroy" for the process group,
"standby <pid>" when it starts as a standby.
A file $DIR/exit makes train() exit with the code in it; $DIR/done makes it
return; $DIR/stubborn makes it ignore the end of its epoch; $DIR/exit-now
makes the process exit with the code in it wherever it is, parked included;
$DIR/hold-exit makes a process that ends wait at its exit until $DIR/let-go
exists (as torch's teardown takes its time), then logs "ended <pid>".
"""

import atexit
import os
import signal
import socket
import sys
import threading
import time
import types

DIR = os.environ["DIR"]


def log(text):
    with open(os.path.join(DIR, "log"), "a") as f:
        f.write(text + "\n")


dist = types.ModuleType("torch.distributed")
dist.initialized = False


def init_process_group(backend, store=None, rank=-1, world_size=-1, timeout=None):
    log(f"init {store}")
    dist.initialized = True
    # A connection of the group, as gloo's to a peer: its end is logged.
    conn = socket.create_connection(("127.0.0.1", int(os.environ["MASTER_PORT"])))
    dist.conn = conn

    def watch():
        try:
            conn.recv(1)
        except OSError:
            pass
        log(f"group connection closed {os.getpid()}")

    threading.Thread(target=watch, daemon=True).start()


def destroy_process_group():
    log("destroy")
    dist.initialized = False
    dist.conn.shutdown(socket.SHUT_RDWR)
    dist.conn.close()


dist.init_process_group = init_process_group
dist.destroy_process_group = destroy_process_group
dist.is_initialized = lambda: dist.initialized
dist.TCPStore = lambda *args, **kwargs: "store"
dist.PrefixStore = lambda prefix, store: prefix
torch = types.ModuleType("torch")
torch.distributed = dist
sys.modules["torch"], sys.modules["torch.distributed"] = torch, dist

import inplace_restart  # noqa: E402


def exit_now():
    path = os.path.join(DIR, "exit-now")
    while not os.path.exists(path):
        time.sleep(0.02)
    code = int(open(path).read())
    os.remove(path)
    os._exit(code)


threading.Thread(target=exit_now, daemon=True).start()


@atexit.register
def hold_exit():
    if not os.path.exists(os.path.join(DIR, "hold-exit")):
        return
    while not os.path.exists(os.path.join(DIR, "let-go")):
        time.sleep(0.02)
    log(f"ended {os.getpid()}")


def train(epoch):
    log(f"start {epoch} {os.getpid()}")
    if os.path.exists(os.path.join(DIR, "stubborn")):
        signal.pthread_sigmask(signal.SIG_BLOCK, [inplace_restart.INTERRUPT])
    try:
        while True:
            path = os.path.join(DIR, "exit")
            if os.path.exists(path):
                code = int(open(path).read())
                os.remove(path)
                sys.exit(code)
            if os.path.exists(os.path.join(DIR, "done")):
                return "done"
            time.sleep(0.02)
    except inplace_restart.EpochOver as over:
        log(f"over {over.epoch}")
        raise


if os.environ.get("INPLACE_STANDBY") == "1":
    log(f"standby {os.getpid()}")
# The store's address: a socket that listens, which run() waits for.
store = socket.create_server(("127.0.0.1", 0))
os.environ.update(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.getsockname()[1]))
log(f"returned {inplace_restart.run(train)}")
