"""One store process per store: the specs and credentials, the supervisor
of the store processes, the session follower, and the commands that talk to
running store processes (`unmount`, `sync`, `status`). Importing this
package loads neither trio, pyfuse3 nor httpx."""

from __future__ import annotations

from ..control import running_stores as running_stores
from ._commands import file_in_mount as file_in_mount
from ._commands import not_listed as not_listed
from ._commands import push_files as push_files
from ._commands import status as status
from ._commands import stop_followers as stop_followers
from ._commands import sync as sync
from ._commands import unmount as unmount
from ._follow import DEFAULT_SESSION_CHECK_INTERVAL as DEFAULT_SESSION_CHECK_INTERVAL
from ._follow import MIN_SESSION_CHECK_INTERVAL as MIN_SESSION_CHECK_INTERVAL
from ._follow import FollowedStore as FollowedStore
from ._follow import SessionFollower as SessionFollower
from ._follow import SessionRecord as SessionRecord
from ._follow import SessionToFollow as SessionToFollow
from ._follow import session_plan as session_plan
from ._follow import session_records as session_records
from ._follow import start_daemon_follower as start_daemon_follower
from ._run import run as run
from ._specs import CREDENTIAL_SOURCES as CREDENTIAL_SOURCES
from ._specs import ENV_SOURCES as ENV_SOURCES
from ._specs import URL_ENV as URL_ENV
from ._specs import WORKER_OWN_ENV as WORKER_OWN_ENV
from ._specs import ConfigFallback as ConfigFallback
from ._specs import Credentials as Credentials
from ._specs import MountSettings as MountSettings
from ._specs import api_client as api_client
from ._specs import build_specs as build_specs
from ._specs import check_store_count as check_store_count
from ._specs import load_resources as load_resources
from ._specs import parse_store_arg as parse_store_arg
from ._specs import read_secret_file as read_secret_file
from ._specs import resolve_credentials as resolve_credentials
from ._specs import store_arg_problem as store_arg_problem
from ._supervisor import Supervisor as Supervisor
