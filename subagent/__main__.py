"""``python -m subagent`` and the ``subagent`` script: the command line (see
``subagent._cli._cli``)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from ._cli._cli import main


def run() -> NoReturn:
    """Run the command and exit with its code.

    ``subagent temporal ...`` leaves without finalizing the interpreter, once its
    output is flushed: temporalio's client threads can abort a finalizing
    interpreter ("PyGILState_Release ... finalizing", temporalio/sdk-python#300),
    which turned a finished command into exit code 134 about once in ten runs.
    """
    code = main()
    if sys.argv[1:2] == ["temporal"]:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
