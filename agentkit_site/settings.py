"""agentkit settings. Everything that differs between machines comes from the environment:
DATABASE_URL, REDIS_URL, SECRET_KEY, DEBUG, ALLOWED_HOSTS, CSRF_TRUSTED_ORIGINS, HTTPS,
HSTS_*, AGENTKIT_CONFIG, AGENTKIT_EXECUTOR, AGENTKIT_WORKSPACES_DIR."""

from __future__ import annotations

import os
from pathlib import Path

from agentkit_site.env import database_from_url, env_bool, env_list, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AGENTKIT_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = secret_key(BASE_DIR / ".secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Served over HTTPS behind a proxy that terminates TLS (docs/deployment.md): HTTPS=1 makes the
# cookies secure, redirects plain HTTP (except /healthz and /metrics: probes, scrapers), trusts
# the proxy's X-Forwarded-Proto and sends HSTS (HSTS_SECONDS, default one year).
HTTPS = env_bool("HTTPS", False)
if HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]  # probes and Prometheus, plain HTTP
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("HSTS_SECONDS", 31_536_000))
    # Only when every subdomain is HTTPS too (docs/deployment.md sets both).
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", False)

AGENTKIT_CONFIG = os.environ.get("AGENTKIT_CONFIG", str(BASE_DIR / "agentkit.yaml"))
# Overrides agentkit.yaml's executor.kind for this deployment (inline | rq): `make cluster` sets
# rq in var/cluster.env, so one agentkit.yaml serves `make run` and the cluster (apps/tasks/conf.py).
AGENTKIT_EXECUTOR = os.environ.get("AGENTKIT_EXECUTOR", "").strip()
# Where workspaces created by `bootstrap` live (the shipped demo is copied here, never edited
# in place, so the repository stays clean).
AGENTKIT_WORKSPACES_DIR = Path(os.environ.get("AGENTKIT_WORKSPACES_DIR", VAR_DIR / "workspaces"))
AGENTKIT_DEMO_SOURCE = BASE_DIR / "demo" / "workspace"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_rq",
    "apps.tasks",
    "apps.tools",
    "apps.specs",
    "apps.evolution",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "agentkit_site.urls"
ASGI_APPLICATION = "agentkit_site.asgi.application"
WSGI_APPLICATION = None

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
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL", "sqlite:///var/db.sqlite3"), BASE_DIR
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one
# The app serves its own static files (no proxy needed on one machine); finders mean no
# collectstatic step. Behind a proxy, run collectstatic and let the proxy serve STATIC_ROOT.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat"
LOGOUT_REDIRECT_URL = "login"

# Largest WebSocket frame the chat accepts (bytes); larger ones get an error frame.
AGENTKIT_WS_MAX_FRAME_BYTES = int(os.environ.get("AGENTKIT_WS_MAX_FRAME_BYTES", 64 * 1024))

# Longest chat/API message (characters): the chat page states it, the server enforces it.
AGENTKIT_MAX_MESSAGE_CHARS = int(os.environ.get("AGENTKIT_MAX_MESSAGE_CHARS", 50_000))

# Redis: channel layer (when REDIS_URL is set) and the RQ queues `agent` and `evolution`.
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Redis Pub/Sub: Redis pushes each group message to the subscribed processes. The
            # list-based RedisChannelLayer receives one message per 3-4 sequential round trips
            # for all sockets of a process, which capped delivery at a few hundred events a
            # second (bench/chat_load.py, bench/streaming.py). Pub/Sub keeps nothing for a
            # process that is not listening; consumers catch up from the database (the source
            # of truth) for anything a layer drops. channels_redis's own class, unmodified.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

_RQ_URL = REDIS_URL or "redis://127.0.0.1:6379/0"
RQ_QUEUES = {
    "agent": {"URL": _RQ_URL, "DEFAULT_TIMEOUT": 3600},
    "evolution": {"URL": _RQ_URL, "DEFAULT_TIMEOUT": 600},
}
# Jobs are enqueued only after the transaction that created their data commits.
RQ = {"COMMIT_MODE": "on_db_commit"}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "daphne": {"level": "WARNING"}},
}
