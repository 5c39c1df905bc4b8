"""One env-driven settings module for development, the demo, tests and production.

Every knob is an environment variable with a default that works on a fresh
clone with no services: SQLite and an embedded Celery broker on SQLite. Set
DATABASE_URL and REDIS_URL to run at scale.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from reviewqueue import task_names

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("REVIEWQUEUE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def envbool(name: str, default: bool) -> bool:
    """A yes/no knob. A value that is neither a yes nor a no word (a typo
    such as "ture") stops start-up: read as False it could quietly turn off
    a security setting."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    accepted = ", ".join(sorted(TRUE_WORDS | FALSE_WORDS))
    raise ImproperlyConfigured(f"{name}={os.environ[name]!r} is not a yes/no value; use one of {accepted}")


def envint(name: str, default: int) -> int:
    """A whole-number knob; anything else stops start-up with the knob's name."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={os.environ[name]!r} is not a whole number") from None


def envlist(name: str, default: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


DEBUG = envbool("DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "")
    if key:
        return key
    # Without SECRET_KEY: a random per-checkout key kept out of git, so a fresh
    # clone runs and no secret ever lives in the repository.
    path = VAR_DIR / "dev_secret_key"
    if not path.exists():
        path.write_text(get_random_secret_key())
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "reviewqueue",
]

MIDDLEWARE = [
    # Outermost: the policy is on every answer, the 503 below included.
    "csp.middleware.CSPMiddleware",
    # Before the session and auth middleware: a lost database answers 503
    # even when one of them meets it.
    "reviewqueue.middleware.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view says otherwise (login, API, metrics).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # Sessions from the identity provider are re-checked with it now and then (a no-op without OIDC_ISSUER).
    "reviewqueue.oidc.RecheckMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "reviewqueue.urls"
WSGI_APPLICATION = "reviewqueue.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "reviewqueue.context_processors.roles",
            ],
        },
    }
]

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'reviewqueue.sqlite3'}")
# Connections are kept open between requests on PostgreSQL: a new one costs
# ~15 ms of server CPU per request, and a fresh connection never reuses
# admit()'s prepared statement. Health checks replace a connection the server
# (or a restart, or PgBouncer) closed before it is used. SQLite opens a file,
# which costs nothing. The README's "Connections and PgBouncer" says how
# this meets a pooler.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=envint("DB_CONN_MAX_AGE", 600 if DATABASE_URL.startswith("postgres") else 0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock up front, so two writers queue
    # instead of deadlocking on a lock upgrade; WAL lets readers run alongside.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_reviewqueue.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django turns prepared statements off for the sake of connection poolers.
    # The ORM's own queries stay unprepared either way (client-side binding);
    # this lets admit()'s one-statement path prepare its statement once per
    # connection, which more than halves its cost. Set 0 behind a pooler that
    # cannot keep prepared statements (PgBouncer before 1.21 in transaction mode).
    DATABASES["default"]["OPTIONS"] = {"prepare_threshold": 5 if envbool("DB_PREPARED_STATEMENTS", True) else None}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    # Without Redis, the database: every web process and worker shares it, so
    # the sign-in limit counted here holds across processes (a per-process
    # LocMemCache gave each worker its own count). A migration makes the table.
    CACHES = {"default": {"BACKEND": "reviewqueue.cache.DatabaseCache", "LOCATION": "reviewqueue_cache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_AGE = envint("SESSION_COOKIE_AGE", 8 * 3600)
# With Redis, sessions are read from it and written through to the database,
# which saves every request its session SELECT and survives a flushed or
# unreachable Redis (reviewqueue/sessions.py). Without Redis the cache is a
# database table: a cached session would cost the same SELECT there plus a
# second write, so the plain database store stays.
SESSION_ENGINE = "reviewqueue.sessions" if REDIS_URL else "django.contrib.sessions.backends.db"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise expects it, even before collectstatic
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Hashed, compressed files once `collectstatic` has run (production).
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if envbool("REVIEWQUEUE_MANIFEST_STATIC", False)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Security: production defaults whenever DEBUG is off; each can be relaxed by env
# (the demo and tests run over plain HTTP on localhost).
WHITENOISE_USE_FINDERS = not envbool("REVIEWQUEUE_MANIFEST_STATIC", False)

SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("BEHIND_TLS_PROXY", False) else None
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# No inline script anywhere: every behaviour lives in static/js.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Sign-in with the team's OpenID Connect provider (docs/SECURITY.md). Without
# OIDC_ISSUER none of it is on. Endpoints come from the issuer's discovery
# document, fetched on first use, so start-up never waits for the provider.
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip().rstrip("/")
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
OIDC_RP_SCOPES = os.environ.get("OIDC_SCOPES", "") or "openid email profile"
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "") or "groups"
OIDC_REVIEWER_GROUPS = envlist("OIDC_REVIEWER_GROUPS", "")
OIDC_OPERATOR_GROUPS = envlist("OIDC_OPERATOR_GROUPS", "")
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "") or "your identity provider"
OIDC_ONLY = envbool("OIDC_ONLY", False)
# A provider session is checked with the provider again after this long.
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = envint("OIDC_RECHECK_SECONDS", 3600)
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # the hint sent with sign-out at the provider
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "reviewqueue.oidc.ProviderBackend"]
if OIDC_ISSUER:
    # The sign-out form's redirect to the provider is a form action too.
    from urllib.parse import urlsplit

    _issuer = urlsplit(OIDC_ISSUER)
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(f"{_issuer.scheme}://{_issuer.netloc}")

# Login attempts per client address (django-ratelimit syntax).
LOGIN_RATE_LIMIT = os.environ.get("LOGIN_RATE_LIMIT", "10/m")
RATELIMIT_ENABLE = envbool("RATELIMIT_ENABLE", True)
# A cache outage must not lock everyone out of signing in (logged when it happens).
RATELIMIT_FAIL_OPEN = True

# Celery: Redis at scale, an embedded SQLite broker on a fresh machine.
_embedded_broker = f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL or _embedded_broker
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One task at a time per worker process: a loop can run for minutes, and a
# prefetched task held by a busy process would wait behind it.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 360)
# Redis redelivers an unacknowledged task after this long; it must exceed the
# longest task (hard limit) or a slow loop would run twice at once.
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT", 600),
        # Look for a dead worker's unacknowledged messages every 10 s (kombu's
        # default scan is rare), so they return soon after the visibility timeout.
        "unacked_restore_interval": 10,
        "unacked_restore_throttle": 1,
        # A silently dropped network must fail a publish, not hang it forever.
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
    }
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
    else {}  # the SQLAlchemy transport hands its options to create_engine()
)
# kombu's Redis transport, with the fix in reviewqueue/broker.py that keeps a
# worker alive when Redis goes away while it holds unacknowledged tasks.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT = "reviewqueue.broker:Transport"
# Producers retry a failed publish with backoff (about 3 s in all) before
# submit_loop reports the broker unavailable; the run row is already stored.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 4, "interval_start": 0.25, "interval_step": 0.5, "interval_max": 1.5}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE = {
    "sample-queue-depth": {"task": task_names.SAMPLE_DEPTH, "schedule": timedelta(seconds=10)},
    "resubmit-stale-runs": {"task": task_names.RESUBMIT_STALE_RUNS, "schedule": timedelta(seconds=60)},
    "expire-leases": {"task": task_names.EXPIRE_LEASES, "schedule": timedelta(seconds=15)},
    # Webhook events whose announcement was lost, or whose retry is due.
    "sweep-webhooks": {"task": task_names.SWEEP_WEBHOOKS, "schedule": timedelta(seconds=5)},
    # The reviewers' error rates, for the noise-aware tuner and the quality page.
    "estimate-reliability": {"task": task_names.ESTIMATE_RELIABILITY, "schedule": timedelta(seconds=60)},
    # Double reviews' disagreements that waited past their queue's delay go to the operators.
    "escalate-disagreements": {"task": task_names.ESCALATE_DISAGREEMENTS, "schedule": timedelta(seconds=60)},
    # Alert conditions (SLA, age, deliveries, sandbox, paused reviewers); mode changes also trigger it.
    "evaluate-alerts": {"task": task_names.EVALUATE_ALERTS, "schedule": timedelta(seconds=30)},
}
# An alert recovers only after its condition has not held for this long, and a
# new episode fires no sooner after a recovery: a flapping queue sends at most
# two messages in twice this time.
ALERT_HOLD_SECONDS = envint("ALERT_HOLD_SECONDS", 300)
# A run still "running" this long after its last start lost its message
# (e.g. the embedded broker's worker was killed outright); it is sent again.
REVIEWQUEUE_STALE_RUN_SECONDS = envint("REVIEWQUEUE_STALE_RUN_SECONDS", 900)

# Request bodies up to this size are read (the API takes outputs of several MB;
# anything larger is refused with 413 before it is parsed).
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("DATA_UPLOAD_MAX_MEMORY_SIZE", 12 * 1024 * 1024)

# Agent output bigger than this is stored cut, with a visible marker.
REVIEWQUEUE_MAX_OUTPUT_CHARS = envint("REVIEWQUEUE_MAX_OUTPUT_CHARS", 500_000)
REVIEWQUEUE_UNDO_SECONDS = envint("REVIEWQUEUE_UNDO_SECONDS", 15)
# Operators may review as reviewers do (the queues open to all, and those they
# are members of); off, reviewing needs the reviewer role.
REVIEWQUEUE_OPERATORS_REVIEW = envbool("REVIEWQUEUE_OPERATORS_REVIEW", True)

# Webhooks (docs/API.md). Callback URLs may name only these hosts (exact
# names, or "host:port"), so a producer cannot make the server call an
# internal address; empty allows none.
WEBHOOK_ALLOWED_HOSTS = envlist("WEBHOOK_ALLOWED_HOSTS", "")
# One attempt's whole budget (connect, send, read): a hanging receiver costs this, once.
WEBHOOK_TIMEOUT_SECONDS = envint("WEBHOOK_TIMEOUT_SECONDS", 5)
# Retries back off exponentially from the first delay up to the longest, with
# jitter, and give up once an event is this old (about a day).
WEBHOOK_RETRY_FIRST_SECONDS = envint("WEBHOOK_RETRY_FIRST_SECONDS", 10)
WEBHOOK_RETRY_MAX_SECONDS = envint("WEBHOOK_RETRY_MAX_SECONDS", 3600)
WEBHOOK_GIVE_UP_SECONDS = envint("WEBHOOK_GIVE_UP_SECONDS", 86_400)
# Attempts in flight to one receiver at once: a hanging endpoint holds at most this many worker slots.
WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT = envint("WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", 2)

LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
