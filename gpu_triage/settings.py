"""Process settings from the environment, read once at startup and passed down explicitly.

Secrets are `SecretStr` so they never show up in a repr or a log line. A missing or malformed
variable becomes one `SettingsError` line naming the variable, never a pydantic dump.
"""

from __future__ import annotations

from pydantic import AnyHttpUrl, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gpu_triage.errors import UserError

_PLACEHOLDERS = frozenset({"", "changeme", "change-me", "xxx", "secret", "placeholder"})


class SettingsError(UserError):
    """A setting is missing or malformed. The message names the environment variable."""


class Settings(BaseSettings):
    """Everything `gpu-triage bot` reads from the environment.

    `SLACK_APP_TOKEN` is optional: when set, the bot uses Socket Mode and opens no port for
    Slack (it still serves `/healthz` and `/metrics` on `PORT`).
    """

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    slack_signing_secret: SecretStr = Field(validation_alias="SLACK_SIGNING_SECRET")
    slack_bot_token: SecretStr = Field(validation_alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(default=None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: AnyHttpUrl | None = Field(default=None, validation_alias="SLACK_API_URL")
    port: int = Field(default=3000, ge=1, le=65535, validation_alias="PORT")
    # /metrics on a port of its own (kept off the Slack endpoint's); None: on PORT.
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535, validation_alias="GPU_TRIAGE_METRICS_PORT"
    )
    # None: the incident store's own default (SQLite under $GPU_TRIAGE_DATA_DIR).
    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    snapshot: str | None = Field(default=None, validation_alias="GPU_TRIAGE_SNAPSHOT")
    playbook: str | None = Field(default=None, validation_alias="GPU_TRIAGE_PLAYBOOK")
    access_policy: str | None = Field(default=None, validation_alias="GPU_TRIAGE_ACCESS_POLICY")
    alerts: str | None = Field(default=None, validation_alias="GPU_TRIAGE_ALERTS")
    cluster_name: str | None = Field(default=None, validation_alias="GPU_TRIAGE_CLUSTER")
    # kubeconfig contexts to serve and watch, comma-separated ("in-cluster" for the cluster
    # the bot runs in; "all" for every context). Empty: the current context only.
    clusters: str | None = Field(default=None, validation_alias="GPU_TRIAGE_CLUSTERS")
    # None: found from the cluster (ClusterPolicy status, the operator's DaemonSets).
    operator_namespace: str | None = Field(
        default=None, validation_alias="GPU_TRIAGE_OPERATOR_NAMESPACE"
    )
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
    def _not_placeholder(cls, value: SecretStr) -> SecretStr:
        if value.get_secret_value().strip().lower() in _PLACEHOLDERS:
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


def _alias(field_name: str) -> str:
    alias = Settings.model_fields[field_name].validation_alias
    return alias if isinstance(alias, str) else field_name.upper()


def load_settings(**overrides: object) -> Settings:
    """`Settings` from the environment plus CLI overrides, or a one-line SettingsError."""
    clean = {_alias(k): v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)  # type: ignore[arg-type]
    except ValidationError as e:
        err = e.errors()[0]
        loc = str(err["loc"][0]) if err["loc"] else "settings"
        name = loc if loc.isupper() else _alias(loc) if loc in Settings.model_fields else loc
        if err["type"] == "missing":
            raise SettingsError(f"{name} is not set") from None
        reason = str(err["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"{name} is malformed: {reason}") from None
