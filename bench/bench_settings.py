"""The project's settings with the baseline views mounted beside the real ones.

Everything else (middleware, database, connection lifetime, sessions) is the
project's own, so a real view and its baseline are served by the same server
under the same settings. Only the benches use this module.
"""

from reviewqueue.settings import *

ROOT_URLCONF = "bench_urls"
