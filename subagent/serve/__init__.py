"""subagent.serve: a pool over HTTP, with a web page for the live tree and approvals.

:func:`app` is the ASGI application (served on trio by Hypercorn: ``pip install
'subagent[serve]'``); ``subagent serve SPECS`` runs it from the command line.
"""

from ._app import MAX_EVENTS as MAX_EVENTS
from ._app import TOKEN_VARIABLE as TOKEN_VARIABLE
from ._app import ServeApp as ServeApp
from ._app import app as app
from ._gate import approve_on_the_page as approve_on_the_page
from ._http import MAX_BODY_BYTES as MAX_BODY_BYTES
from ._hub import BusyError as BusyError
from ._hub import ConflictError as ConflictError
from ._hub import NotFoundError as NotFoundError
from ._hub import ServeError as ServeError
from ._hub import ServeStatistics as ServeStatistics
