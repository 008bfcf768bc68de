"""Process settings from the environment, read once at startup and passed down explicitly.

Every variable the commands and the bot read is a field here, so each is parsed once, with one
default: `CommonSettings` for every command, `Settings` adds the bot's. Nothing else in
`gpu_triage/`, `bot/`, `assist/` or `incidents/` reads the environment for them (the incident
store's own fallbacks serve library callers; the commands pass its URL, timeouts and migration
choice from here). A flag given on the command line wins over its variable.

Secrets are `SecretStr` so they never show up in a repr or a log line. A missing or malformed
variable becomes one `SettingsError` line naming the variable, never a pydantic dump.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import AnyHttpUrl, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gpu_triage.errors import UserError
from triage import EngineConfig

if TYPE_CHECKING:
    from incidents.store import IncidentStore
    from incidents.timeouts import Timeouts

_PLACEHOLDERS = frozenset({"", "changeme", "change-me", "xxx", "secret", "placeholder"})
DEFAULT_TIMEOUT = 120.0  # seconds a command may spend reading a live cluster
# ... once it lists every pod of the cluster (`pending -A`, a pod that fits anywhere): 1,200
# list pages at 20,000 nodes, one in flight per list as kubectl reads them; 100 ms a page (a
# laptop far from its cluster, a busy API server) is two minutes of round trips alone.
WIDE_TIMEOUT = 600.0


class SettingsError(UserError):
    """A setting is missing or malformed. The message names the environment variable."""


class CommonSettings(BaseSettings):
    """What every command reads from the environment: the incident database, the engine's
    settings, the access policy, how long to read a live cluster, the language model."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    # None: SQLite under `data_dir` (`store_url`).
    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    # None: the user's data folder ($XDG_DATA_HOME/gpu-triage, else ~/.local/share/gpu-triage).
    data_dir: str | None = Field(default=None, validation_alias="GPU_TRIAGE_DATA_DIR")
    # None (unset): each command's documented default. The bot migrates at start unless it is
    # off; the read commands only when it is on (or with --auto-migrate); `--record` always.
    auto_migrate: bool | None = Field(default=None, validation_alias="GPU_TRIAGE_AUTO_MIGRATE")
    db_lock_timeout: float = Field(default=3.0, validation_alias="GPU_TRIAGE_DB_LOCK_TIMEOUT")
    db_statement_timeout: float = Field(
        default=5.0, validation_alias="GPU_TRIAGE_DB_STATEMENT_TIMEOUT"
    )
    playbook: str | None = Field(default=None, validation_alias="GPU_TRIAGE_PLAYBOOK")
    # None: found from the cluster (ClusterPolicy status, the operator's DaemonSets).
    operator_namespace: str | None = Field(
        default=None, validation_alias="GPU_TRIAGE_OPERATOR_NAMESPACE"
    )
    access_policy: str | None = Field(default=None, validation_alias="GPU_TRIAGE_ACCESS_POLICY")
    timeout: float = Field(default=DEFAULT_TIMEOUT, validation_alias="GPU_TRIAGE_TIMEOUT")
    # The language model behind `ask` and the summaries (assist.provider); unset: none.
    llm_provider: str | None = Field(default=None, validation_alias="GPU_TRIAGE_LLM_PROVIDER")
    llm_model: str | None = Field(default=None, validation_alias="GPU_TRIAGE_LLM_MODEL")

    @field_validator("auto_migrate", "operator_namespace", "playbook", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("db_lock_timeout", "db_statement_timeout", mode="before")
    @classmethod
    def _db_seconds(cls, value: object) -> object:
        return _seconds(value, limit=3600)

    @field_validator("timeout", mode="before")
    @classmethod
    def _read_seconds(cls, value: object) -> object:
        return _seconds(value, limit=86400)

    @property
    def store_url(self) -> str:
        """The incident database: `DATABASE_URL`, else SQLite under the data directory."""
        from incidents.database import default_data_dir, sqlite_url  # SQLAlchemy: only now

        return self.database_url or sqlite_url(self.data_dir or default_data_dir())

    @property
    def store_timeouts(self) -> Timeouts:
        from incidents.timeouts import Timeouts

        return Timeouts(lock=self.db_lock_timeout, statement=self.db_statement_timeout)

    def open_store(self, *, migrate: bool) -> IncidentStore:
        """The incident store, upgraded first when `GPU_TRIAGE_AUTO_MIGRATE` says so (when it
        is unset: `migrate`, the calling command's documented default)."""
        from incidents.store import IncidentStore

        auto = migrate if self.auto_migrate is None else self.auto_migrate
        return IncidentStore.open(self.store_url, auto_migrate=auto, timeouts=self.store_timeouts)

    def engine_config(self) -> EngineConfig:
        return EngineConfig(operator_namespace=self.operator_namespace)

    @property
    def llm(self) -> dict[str, str]:
        """The language model's variables, as `assist.provider.model_from_env` reads them."""
        from assist.provider import MODEL_ENV, PROVIDER_ENV

        named = {PROVIDER_ENV: self.llm_provider, MODEL_ENV: self.llm_model}
        return {k: v for k, v in named.items() if v is not None}


def _seconds(value: object, *, limit: int) -> object:
    """A number of seconds in (0, limit], or a ValueError saying so."""
    if value is None or isinstance(value, bool):
        return value
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= limit:
        raise ValueError(f"must be a number of seconds between 0 and {limit}, not {value!r}")
    return seconds


class Settings(CommonSettings):
    """Everything `gpu-triage bot` reads from the environment.

    `SLACK_APP_TOKEN` is optional: when set, the bot uses Socket Mode and opens no port for
    Slack (it still serves `/healthz` and `/metrics` on `PORT`).
    """

    # Signs Slack's HTTP requests; Socket Mode (SLACK_APP_TOKEN) receives none: not needed.
    slack_signing_secret: SecretStr | None = Field(
        default=None, validation_alias="SLACK_SIGNING_SECRET"
    )
    slack_bot_token: SecretStr = Field(validation_alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(default=None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: AnyHttpUrl | None = Field(default=None, validation_alias="SLACK_API_URL")
    port: int = Field(default=3000, ge=1, le=65535, validation_alias="PORT")
    # /metrics on a port of its own (kept off the Slack endpoint's); None: on PORT.
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535, validation_alias="GPU_TRIAGE_METRICS_PORT"
    )
    snapshot: str | None = Field(default=None, validation_alias="GPU_TRIAGE_SNAPSHOT")
    alerts: str | None = Field(default=None, validation_alias="GPU_TRIAGE_ALERTS")
    cluster_name: str | None = Field(default=None, validation_alias="GPU_TRIAGE_CLUSTER")
    # kubeconfig contexts to serve and watch, comma-separated ("in-cluster" for the cluster
    # the bot runs in; "all" for every context). Empty: the current context only.
    clusters: str | None = Field(default=None, validation_alias="GPU_TRIAGE_CLUSTERS")
    workers: int = Field(default=4, ge=1, le=64, validation_alias="GPU_TRIAGE_WORKERS")
    # Threads that answer HTTP and run bolt's listeners up to their ack (never a triage).
    http_threads: int = Field(default=16, ge=2, le=256, validation_alias="GPU_TRIAGE_HTTP_THREADS")
    # Sync caches by the watch-list protocol (Kubernetes 1.32+; a server that refuses it is
    # listed instead). Off: always list page by page (an API proxy that mishandles streams).
    watch_list: bool = Field(default=True, validation_alias="GPU_TRIAGE_WATCH_LIST")
    max_pending: int = Field(default=32, ge=1, le=10_000, validation_alias="GPU_TRIAGE_MAX_PENDING")
    # Replicas: this one's name (default: hostname-pid-random), how long a command stays with
    # the replica that took it without a renewal (then another replica answers it), and how
    # often each replica looks for commands left by others.
    replica_id: str | None = Field(
        default=None, max_length=128, validation_alias="GPU_TRIAGE_REPLICA_ID"
    )
    job_lease: float = Field(
        default=30.0, ge=1.0, le=600.0, validation_alias="GPU_TRIAGE_JOB_LEASE"
    )
    job_poll: float = Field(default=1.0, gt=0.0, le=60.0, validation_alias="GPU_TRIAGE_JOB_POLL")
    # Requests to /slack/events larger than this are refused (413) before they are read.
    # Slack's are a few KB.
    max_body_bytes: int = Field(
        default=256 * 1024, ge=4096, le=16 * 1024 * 1024, validation_alias="GPU_TRIAGE_MAX_BODY"
    )
    # How long an ack waits for its delivery to be recorded (and a first reply for its claim)
    # before it goes on without: the database must never hold up Slack's 3 seconds.
    delivery_deadline: float = Field(
        default=1.0, gt=0.0, le=2.5, validation_alias="GPU_TRIAGE_DELIVERY_DEADLINE"
    )
    # Where replies may be posted by response URL (comma-separated prefixes): Slack's own.
    # A request naming any other URL is refused, so nobody can make the bot post elsewhere.
    response_urls: str = Field(
        default="https://hooks.slack.com/", validation_alias="SLACK_RESPONSE_URL_PREFIXES"
    )

    @field_validator("slack_signing_secret", "slack_bot_token")
    @classmethod
    def _not_placeholder(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value().strip().lower() in _PLACEHOLDERS:
            raise ValueError("is empty or a placeholder")
        return value

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token_shape(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().startswith("xoxb-"):
            raise ValueError("must be a bot token starting with xoxb-")
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        if not value.get_secret_value().startswith("xapp-"):
            raise ValueError("must be an app-level token starting with xapp-")
        return value

    @field_validator("response_urls")
    @classmethod
    def _url_prefixes(cls, value: str) -> str:
        prefixes = [p.strip() for p in value.split(",") if p.strip()]
        if not prefixes:
            raise ValueError("names no URL prefix")
        bad = [p for p in prefixes if not p.startswith(("https://", "http://")) or p.count("/") < 3]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a URL prefix such as https://hooks.slack.com/")
        return value

    @model_validator(mode="after")
    def _signing_secret_for_http(self) -> Settings:
        if self.slack_signing_secret is None and self.slack_app_token is None:
            raise ValueError(
                "SLACK_SIGNING_SECRET is not set"  # HTTP mode needs it; Socket Mode does not
            )
        return self

    @property
    def signing_secret(self) -> str:
        """The signing secret, empty in Socket Mode (whose requests are not signed)."""
        s = self.slack_signing_secret
        return "" if s is None else s.get_secret_value()

    @property
    def response_url_prefixes(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.response_urls.split(",") if p.strip())

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def api_base_url(self) -> str:
        """The Web API base URL with the trailing slash slack_sdk expects."""
        if self.slack_api_url is None:
            return "https://slack.com/api/"
        url = str(self.slack_api_url)
        return url if url.endswith("/") else url + "/"


S = TypeVar("S", bound=CommonSettings)


def _alias(cls: type[CommonSettings], field_name: str) -> str:
    alias = cls.model_fields[field_name].validation_alias
    return alias if isinstance(alias, str) else field_name.upper()


def _load(cls: type[S], overrides: dict[str, Any]) -> S:
    """`cls` from the environment plus CLI overrides, or a one-line SettingsError."""
    clean = {_alias(cls, k): v for k, v in overrides.items() if v is not None}
    try:
        return cls(**clean)
    except ValidationError as e:
        err = e.errors()[0]
        if not err["loc"]:  # a rule across settings: its message names the variables
            raise SettingsError(str(err["msg"]).removeprefix("Value error, ")) from None
        loc = str(err["loc"][0]) if err["loc"] else "settings"
        name = loc if loc.isupper() else _alias(cls, loc) if loc in cls.model_fields else loc
        if err["type"] == "missing":
            raise SettingsError(f"{name} is not set") from None
        reason = str(err["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"{name} is malformed: {reason}") from None


def load_settings(**overrides: object) -> Settings:
    """The bot's `Settings` from the environment plus CLI overrides."""
    return _load(Settings, overrides)


def load_common_settings(**overrides: object) -> CommonSettings:
    """A command's `CommonSettings` from the environment plus its flags (None: not given)."""
    return _load(CommonSettings, overrides)


def settings_of(args: argparse.Namespace) -> CommonSettings:
    """The settings, with the command's flags over the environment (a flag not given is
    None, and leaves its variable or default)."""
    given = {k: v for k, v in vars(args).items() if k in CommonSettings.model_fields}
    return load_common_settings(**given)
