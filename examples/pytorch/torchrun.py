"""torchrun that exits with its failed workers' exit code.

torchrun itself exits 1 whatever its workers' codes were, which hides a
fatal code from the Job's podFailurePolicy: a rule "exit code 42 fails the
JobSet" would never match. This runs torchrun unchanged (the same flags),
and when workers failed, exits with the code that says the most: a code
other than 1 if any worker exited with one (a rank's own "do not retry"
code; its peers exit 1 the moment their collectives break, often in the
same instant, so which failed first cannot tell), else 1, else the signal
that killed a worker as 128+S, as a shell would.

With --run_path and --start_method=fork the ranks are forks of this
process, which has imported torch: no rank imports it again. torchrun
then names only the first rank it saw fail, maybe a peer that exited 1,
and ends the others with SIGTERM. So each rank writes the code it exits
with, when other than 0 and 1, to memory shared with this process, the
moment it calls sys.exit: before its own teardown breaks its peers'
collectives. Each rank also puts back the default dispositions of the
signals torchrun handles, which it sets before it forks: a rank blocked
in a collective ends at SIGTERM, as a new process would, instead of when
the collective returns.
"""

import multiprocessing
import runpy
import signal
import sys

import torch.distributed.run as torchrun
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

# A code other than 0 and 1 a forked rank exited with (0: none). Without a
# lock: a rank may be killed at any instant, and any rank's fatal code
# will do.
fatal = multiprocessing.RawValue("i", 0)


def exit_code(failures):
    codes = [f.exitcode for f in failures.values()]
    chosen = [c for c in codes if c > 1] or [c for c in codes if c == 1] or codes
    code = chosen[0]
    return 128 - code if code < 0 else code or 1


def record(code):
    """Records the exit status sys.exit(code) gives the process, as Python
    computes it, when fatal (above 1); returns it."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        status = 1  # a message, printed to stderr
    if status > 1:
        fatal.value = status
    return status


def run_script_path(training_script, *training_script_args):
    """torchrun's --run_path entry point, run in each forked rank."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    exit_ = sys.exit

    def recorded_exit(code=None):
        record(code)
        exit_(code)

    sys.exit = recorded_exit
    sys.argv = [training_script, *training_script_args]
    try:
        runpy.run_path(training_script, run_name="__main__")
    except SystemExit as err:
        # Recorded again for a SystemExit raised, not called.
        if record(err.code) == 0:
            # torchrun waits for a return value from every rank: an exit
            # with 0 is a return.
            return None
        raise


if __name__ == "__main__":
    args = torchrun.parse_args(sys.argv[1:])
    if args.run_path and args.start_method == "fork":
        # Looked up by name when torchrun reads --run_path.
        torchrun.run_script_path = run_script_path
    try:
        torchrun.main()
    except ChildFailedError as err:
        sys.exit(fatal.value or exit_code(err.failures))
