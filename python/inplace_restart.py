"""In-process restarts for PyTorch: the worker side of inplace's worker protocol.

In a JobSet annotated ``inplace.dev/restart-scope: in-process``, a rank
that did not fail is not killed when another rank fails. Its supervisor
tells it that its epoch is over; it leaves its step, tears its process
group down, waits for the next epoch's barrier, and forms the group again
in the same process: Python, torch and the data already loaded stay. The
rank that failed starts again as a new process. The protocol is in
docs/reference/worker-protocol.md.

Use::

    import inplace_restart

    def train(epoch):
        # The default process group is formed. Build the model, wrap it in
        # DistributedDataParallel, load the newest checkpoint, train.
        ...

    inplace_restart.run(train, backend="gloo")

``train`` runs once per epoch. It returns when training is done; what it
returns, ``run`` returns. When the epoch ends under it, ``run`` raises
``EpochOver`` in it (at the next Python instruction: between two steps,
in a sleep, or as soon as a collective returns), tears the group down and
calls it again at the next epoch. ``EpochOver`` derives from
BaseException, so that ``except Exception`` does not take it.

The supervisor may start a standby: the same command, started ahead, whose
``run`` waits until a worker that failed needs its place. What the
program does before it calls ``run`` (imports, reading its data) is then
done when a rank fails. It must not take what the worker holds alone (a
GPU's memory, a port) before ``run``.

The environment is torch's: ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``. Rank 0 serves the store the ranks meet at; each epoch
uses keys of its own. Outside in-process scope (``INPLACE_CONTROL`` is not
set, as under torchrun in the other scopes) ``run`` forms the group from
the environment (``env://``) and calls ``train`` once.

Only the standard library at import; torch when ``run`` is called.
"""

import datetime
import os
import signal
import socket
import sys
import threading
import time

# The supervisor's environment (api/protocol/inprocess.go).
ENV_CONTROL = "INPLACE_CONTROL"
ENV_DEADLINE = "INPLACE_PARK_DEADLINE"
ENV_EPOCH = "INPLACE_EPOCH"
ENV_STANDBY = "INPLACE_STANDBY"

# The signal run() interrupts the main thread with, in this process only.
INTERRUPT = signal.SIGUSR1

# How long a rank whose collective failed (a RuntimeError, as gloo raises)
# waits to be told that its epoch is over before it fails as a process:
# the failure of a peer reaches the supervisor through its agent and the
# controller in about a second. Any other exception fails the process at
# once.
PEER_FAILURE_WAIT = float(os.environ.get("INPLACE_PEER_FAILURE_WAIT", "5"))


class EpochOver(BaseException):
    """The epoch the process group was formed at is over."""

    def __init__(self, epoch):
        super().__init__(f"epoch {epoch} is over")
        self.epoch = epoch


def log(msg):
    sys.stderr.write(f"inplace_restart: {msg}\n")
    sys.stderr.flush()


class Control:
    """A connection to the supervisor's control socket.

    A thread reads the supervisor's lines: ``start E`` (the process may run
    at epoch E) and ``stop E`` (epoch E is over). ``park(E)`` writes
    ``parked E``: the process has left epoch E.
    """

    def __init__(self, address, deadline):
        self.deadline = deadline
        self.started = 0  # the newest epoch "start" named
        self.stopped = 0  # the newest epoch "stop" named
        self.closed = False
        self.pid = os.getpid()  # a child forked by train must not speak for it
        self.on_stop = None  # called with the epoch, on the reading thread
        self._cond = threading.Condition()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # "@name" is a name in Linux's abstract namespace.
        self._sock.connect("\0" + address[1:] if address.startswith("@") else address)
        threading.Thread(target=self._read, name="inplace-control", daemon=True).start()

    @classmethod
    def from_env(cls):
        """The supervisor's control socket, or None outside in-process scope."""
        address = os.environ.get(ENV_CONTROL)
        if not address:
            return None
        return cls(address, float(os.environ.get(ENV_DEADLINE, "10")))

    def _read(self):
        try:
            with self._sock.makefile("r", encoding="ascii", errors="replace") as f:
                for line in f:
                    word, _, number = line.strip().partition(" ")
                    try:
                        epoch = int(number)
                    except ValueError:
                        continue
                    with self._cond:
                        if word == "start":
                            self.started = max(self.started, epoch)
                        elif word == "stop":
                            self.stopped = max(self.stopped, epoch)
                        self._cond.notify_all()
                        callback = self.on_stop if word == "stop" else None
                    if callback is not None:
                        callback(epoch)
        except OSError as err:
            log(f"control socket: {err}")
        finally:
            # The supervisor is gone, or the connection: the container is
            # ending, and nobody will say "start" again.
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def wait_start(self, after):
        """Waits for leave to run at an epoch after ``after``; None if the
        supervisor went away."""
        with self._cond:
            self._cond.wait_for(lambda: self.closed or self.started > after)
            return None if self.closed else self.started

    def wait_stop(self, epoch, timeout):
        """Waits up to timeout seconds for epoch to be over."""
        with self._cond:
            return self._cond.wait_for(lambda: self.closed or self.stopped >= epoch, timeout) and not self.closed

    def over(self, epoch):
        with self._cond:
            return self.stopped >= epoch

    def park(self, epoch):
        self._sock.sendall(f"parked {epoch}\n".encode("ascii"))

    def failed(self, epoch, code):
        """Writes ``failed E C``: the process fails at epoch E and exits
        with code C. The restart begins while the process ends. Only the
        process that connected says it: a child that train forked and
        that fails is not the worker."""
        if os.getpid() != self.pid:
            return False
        try:
            self._sock.sendall(f"failed {epoch} {code}\n".encode("ascii"))
        except OSError:
            pass  # its exit says the same, later
        return True


def exit_code(err):
    """The code the process exits with when err ends it, if it fails:
    None for a success, and for an interrupt (the signal ends it)."""
    if isinstance(err, KeyboardInterrupt):
        return None
    if isinstance(err, SystemExit):
        if err.code is None:
            return None
        if isinstance(err.code, int):
            if not -(1 << 63) <= err.code < (1 << 63):
                return 255  # Python's own exit code for one past a C long
            return err.code & 0xFF or None
    return 1


def sockets():
    """The process's sockets, by the name /proc gives each ("socket:[N]"),
    to one of their file descriptors."""
    out = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out[target] = int(name)
    return out


def shut_down(which):
    """Shuts down the process's sockets for which which(name, socket) is
    true, but listening ones (torch's store aborts the process when its
    listener is shut down under it); returns how many."""
    cut = 0
    for name, fd in sockets().items():
        try:
            dup = os.dup(fd)
        except OSError:
            continue
        try:
            s = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        with s:
            try:
                if not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) and which(name, s):
                    s.shutdown(socket.SHUT_RDWR)
                    cut += 1
            except OSError:
                pass
    return cut


def cut_tcp_connections(keep_port):
    """Shuts down this process's connected TCP sockets but the store's.

    A collective whose peer is gone without closing its connections (a
    frozen process, a lost node) waits for the process group's timeout:
    gloo cannot abort it. Its connections shut down, it fails at once.
    Rank 0 keeps the connections its store serves (those of local port
    keep_port, the store's): it serves every epoch. Every rank connects
    to the store again at each epoch. Listening sockets stay.
    """
    return shut_down(lambda _, s: s.family in (socket.AF_INET, socket.AF_INET6)
                     and s.type == socket.SOCK_STREAM and s.getsockname()[1] != keep_port)


def wait_for_store(address, port, timeout):
    """Waits until the store at address:port accepts connections, trying
    every 10 ms, up to timeout (a timedelta). The name is resolved once."""
    deadline = time.monotonic() + timeout.total_seconds()
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return  # the store's own client says why
    while True:
        with socket.socket(family, kind, proto) as s:
            s.settimeout(1)
            try:
                s.connect(addr)
                return
            except OSError:
                pass
        if time.monotonic() > deadline:
            return  # the store's own client says why
        time.sleep(0.01)


def teardown(dist, rank):
    """Destroys the default process group, if there is one, and returns
    the seconds it took."""
    began = time.monotonic()
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception as err:  # a broken group still ends
            log(f"rank {rank}: tearing the process group down: {err}")
    return time.monotonic() - began


def run(train, backend="gloo", timeout=datetime.timedelta(minutes=30)):
    """Runs train(epoch) with the default process group formed, once per
    epoch of in-process scope, until it returns; see the module's doc."""
    import torch.distributed as dist

    ctl = Control.from_env()
    if ctl is None:
        dist.init_process_group(backend, timeout=timeout)
        try:
            return train(int(os.environ.get(ENV_EPOCH, "0")))
        finally:
            dist.destroy_process_group()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if os.environ.get(ENV_STANDBY) == "1":
        log(f"rank {rank} (pid {os.getpid()}) is a standby: it takes the place of this container's worker if that fails")
    main = threading.main_thread().ident
    armed = threading.Event()  # set while train may be interrupted
    sent = threading.Event()  # set while run's own signal is on its way
    running = [0]  # the epoch train runs at
    previous = signal.getsignal(INTERRUPT)

    def interrupted(signum, frame):
        if sent.is_set():
            sent.clear()
            if armed.is_set() and ctl.over(running[0]):
                raise EpochOver(running[0])
            return  # train ended first: nothing to interrupt
        if callable(previous):  # the program's own, for its own signal
            previous(signum, frame)

    def stopped(epoch):
        if not armed.is_set() or epoch != running[0]:
            return
        sent.set()
        signal.pthread_kill(main, INTERRUPT)
        # A collective stuck on a silent peer does not return: halfway to
        # the deadline, its connections are cut.
        def cut():
            if armed.is_set() and running[0] == epoch:
                log(f"rank {rank}: still in epoch {epoch} after {ctl.deadline / 2:g}s: cut {cut_tcp_connections(port if rank == 0 else None)} TCP connections")
        timer = threading.Timer(ctl.deadline / 2, cut)
        timer.daemon = True
        timer.start()

    signal.signal(INTERRUPT, interrupted)
    ctl.on_stop = stopped
    server = None  # rank 0's store, served to every epoch
    # The sockets torch.distributed opened for the epoch (None while it
    # forms the group), and those open before.
    opened, before = set(), {}

    def shut_down_epoch():
        """Shuts down what torch.distributed opened for the epoch: all
        that was opened since the epoch began, if the group is forming."""
        names = opened if opened is not None else set(sockets()) - set(before)
        shut_down(lambda name, _: name in names)
    epoch = 0
    while True:
        epoch = ctl.wait_start(epoch)
        if epoch is None:
            sys.exit("inplace_restart: the supervisor went away")
        running[0] = epoch
        log(f"rank {rank} (pid {os.getpid()}) runs at epoch {epoch}")
        try:
            try:
                armed.set()
                if ctl.over(epoch):
                    raise EpochOver(epoch)
                before, opened = sockets(), None
                if rank == 0 and server is None:
                    server = dist.TCPStore(address, port, world, True, timeout, wait_for_workers=False)
                elif rank != 0:
                    # A rank 0 that starts with this epoch serves the store
                    # only now: torch's client retries a refused connection
                    # a second later, so the client waits here instead.
                    wait_for_store(address, port, timeout)
                # A client of its own at each epoch, rank 0's too: one cut
                # in an epoch that ended does not outlive it.
                client = dist.TCPStore(address, port, world, False, timeout)
                dist.init_process_group(backend, store=dist.PrefixStore(f"inplace/{epoch}/", client),
                                        rank=rank, world_size=world, timeout=timeout)
                # What torch.distributed opened for the epoch: the store's
                # connections (on rank 0, those it serves too) and the
                # group's to its peers.
                opened = set(sockets()) - set(before)
                result = train(epoch)
            finally:
                armed.clear()
        except EpochOver:
            took = teardown(dist, rank)
        except RuntimeError as err:
            # A peer failed under a collective: the epoch ends soon, unless
            # this failure is the process's own. The group goes first, so
            # that the peers' collectives fail at once either way.
            took = teardown(dist, rank)
            if not ctl.wait_stop(epoch, PEER_FAILURE_WAIT):
                if ctl.failed(epoch, 1):  # an uncaught exception exits with 1
                    shut_down_epoch()
                raise
            log(f"rank {rank}: epoch {epoch} is over: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        except BaseException as err:
            # The process fails: its supervisor hears it now, not once
            # Python has ended, which with torch loaded takes most of a
            # second.
            code = exit_code(err)
            if code is not None and ctl.failed(epoch, code):
                # The epoch's connections shut down now, not at the
                # process's exit: its peers' collectives fail at once, and
                # they park while it ends; the process ends sooner too.
                # Its other connections stay, for what runs at its exit.
                # (Destroying the group here, with torch's teardown, made
                # the process end later.)
                shut_down_epoch()
            raise
        else:
            dist.destroy_process_group()
            return result
        # Logged first, so that the supervisor's line follows it.
        log(f"rank {rank} parks at epoch {epoch} ({took:.3f}s to tear down)")
        ctl.park(epoch)
