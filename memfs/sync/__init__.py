"""The sync pass: change detection, the three-way decision table, conflicts,
deletions, retries. Talks to the store through the client and to the local
state through the cache's sync face; never touches FUSE."""

from __future__ import annotations

from ._decide import TABLE as TABLE
from ._decide import Action as Action
from ._decide import Local as Local
from ._decide import Remote as Remote
from ._decide import decide as decide
from ._decide import remote_state as remote_state
from ._deletes import EndOfSession as EndOfSession
from ._engine import SyncEngine as SyncEngine
from ._shared import FINAL_CONCURRENCY as FINAL_CONCURRENCY
from ._shared import QUIET_SECONDS as QUIET_SECONDS
from ._shared import backoff_delay as backoff_delay
from ._shared import delete_cap as delete_cap
