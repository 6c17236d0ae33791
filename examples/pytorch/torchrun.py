"""torchrun that exits with its failed workers' exit code.

torchrun itself exits 1 whatever its workers' codes were, which hides a
fatal code from the Job's podFailurePolicy: a rule "exit code 42 fails the
JobSet" would never match. This runs torchrun unchanged (the same flags),
and when workers failed, exits with the code that says the most: a code
other than 1 if any worker exited with one (a rank's own "do not retry"
code; its peers exit 1 the moment their collectives break, often in the
same instant, so which failed first cannot tell), else 1, else the signal
that killed a worker as 128+S, as a shell would.
"""

import sys

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main


def exit_code(failures):
    codes = [f.exitcode for f in failures.values()]
    chosen = [c for c in codes if c > 1] or [c for c in codes if c == 1] or codes
    code = chosen[0]
    return 128 - code if code < 0 else code or 1


if __name__ == "__main__":
    try:
        main()
    except ChildFailedError as err:
        sys.exit(exit_code(err.failures))
