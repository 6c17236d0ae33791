"""torchrun that exits with its failed worker's exit code.

torchrun itself exits 1 whatever its workers' codes were, which hides a
fatal code from the Job's podFailurePolicy: a rule "exit code 42 fails the
JobSet" would never match. This runs torchrun unchanged (the same flags),
and when a worker failed, exits with the code of the first worker that
failed; a worker killed by signal S gives 128+S, as a shell would.
"""

import sys

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main

if __name__ == "__main__":
    try:
        main()
    except ChildFailedError as err:
        _, failure = err.get_first_failure()
        code = failure.exitcode
        sys.exit(128 - code if code < 0 else code or 1)
