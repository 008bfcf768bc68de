"""`gpu-triage bot`: run the Slack app (HTTP Events API, or Socket Mode with SLACK_APP_TOKEN).

Everything is read and checked before the first request: settings, access policy, playbook,
the incident database (migrated to head), the cluster source and the Slack token (auth.test).
Any failure there is one line naming what to fix.
"""

from __future__ import annotations

import argparse
import logging
import signal
import time
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from gpu_triage.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from slack_sdk import WebClient

    from assist.ask import Assistant
    from bot.core.alerts import AlertConfig
    from bot.core.policy import AccessPolicy
    from bot.slack.app import TriageApp
    from bot.slack.server import Server
    from gpu_triage.alerting import AlertLoop
    from gpu_triage.metrics import Metrics
    from gpu_triage.service import TriageService
    from gpu_triage.settings import Settings
    from incidents.store import IncidentStore
    from kube.cache import CachedSource
    from triage import ClusterSource, EngineConfig, Playbook, SourceStatus

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bot",
        help="run the Slack bot (/gpu commands)",
        description="Run the Slack bot. Secrets come from the environment: "
        "SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, optional SLACK_APP_TOKEN (Socket Mode), "
        "SLACK_API_URL, DATABASE_URL.",
    )
    p.add_argument("--port", type=int, help="HTTP port (default: $PORT or 3000)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default: 0.0.0.0)")
    p.add_argument(
        "--snapshot", help="serve this snapshot instead of a live cluster ($GPU_TRIAGE_SNAPSHOT)"
    )
    p.add_argument("--playbook", help="playbook YAML ($GPU_TRIAGE_PLAYBOOK; default: bundled)")
    p.add_argument("--access-policy", help="access policy YAML ($GPU_TRIAGE_ACCESS_POLICY)")
    p.add_argument(
        "--alerts", help="alerts YAML: channels that get fleet-view alerts ($GPU_TRIAGE_ALERTS)"
    )
    p.add_argument("--database-url", help="incident database ($DATABASE_URL)")
    p.add_argument("--cluster-name", help="name users pass as --cluster ($GPU_TRIAGE_CLUSTER)")
    p.add_argument(
        "--clusters",
        help="kubeconfig contexts to serve and sweep, comma-separated; 'in-cluster' for the "
        "cluster the bot runs in, 'all' for every context ($GPU_TRIAGE_CLUSTERS; default: "
        "the current context)",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: current context)")
    p.set_defaults(handler=run, needs="bot")


def run(args: argparse.Namespace) -> int:
    # Imported here: slack-bolt, SQLAlchemy and the app modules cost ~0.6 s that every other
    # `gpu-triage` command would otherwise pay at startup.
    from bot.slack.messages import NO_POLICY_NOTICE
    from gpu_triage.metrics import Metrics
    from gpu_triage.service import TriageService
    from gpu_triage.settings import load_settings
    from kube.cache import few_malloc_arenas

    few_malloc_arenas()  # before any cache's threads
    settings = load_settings(
        port=args.port,
        snapshot=args.snapshot,
        playbook=args.playbook,
        access_policy=args.access_policy,
        alerts=args.alerts,
        database_url=args.database_url,
        cluster_name=args.cluster_name,
        clusters=args.clusters,
    )
    policy = _policy(settings)
    playbook = _playbook(settings)
    alerts = _alerts_config(settings.alerts)
    store = _store(settings)
    config = settings.engine_config()
    clusters = _sources(settings, args, config)
    metrics = Metrics(store=store, caches=clusters.caches)
    service = TriageService(
        source_for=clusters.source_for,
        config=config,
        playbook=playbook,
        store=store,
        metrics=metrics,
        statuses=clusters.statuses,
    )
    app = _app(settings, service=service, store=store, policy=policy)
    server = _server(
        app, args=args, settings=settings, metrics=metrics, clusters=clusters,
        notice=NO_POLICY_NOTICE if policy.empty else None,
    )  # fmt: skip
    stop_metrics = _serve_metrics(metrics, host=args.host, port=settings.metrics_port, app=app)

    loop = None
    if alerts is not None:
        loop = _alert_loop(app, alerts, service=service, metrics=metrics, clusters=clusters)
        loop.start()

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    mode = (
        "Socket Mode" if settings.socket_mode else f"http://{args.host}:{server.port}/slack/events"
    )
    log.info(
        "replica %s serving %s via %s; health on :%s/healthz; metrics on :%s/metrics%s",
        app.dispatcher.relay.owner, clusters.description, mode, server.port,
        settings.metrics_port or server.port,
        f"; alerts to {len(alerts.channels)} channel(s), sweep every "
        f"{alerts.interval_seconds:g}s" if alerts is not None else "",
    )  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if loop is not None:
            loop.stop()
        server.stop()
        stop_metrics()
        clusters.close()
    return 0


def slack_client(settings: Settings) -> WebClient:
    """The Web API client: slack_sdk's own retry handlers for a refused connection, 429 (after
    its Retry-After) and 5xx, so a Slack hiccup delays an answer instead of losing it."""
    from slack_sdk import WebClient
    from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
    from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler  # 500 and 503

    return WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.api_base_url,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=2),
            RateLimitErrorRetryHandler(max_retry_count=3),
            ServerErrorRetryHandler(max_retry_count=2),
        ],
    )


def _serve_metrics(
    metrics: Metrics, *, host: str, port: int | None, app: TriageApp
) -> Callable[[], None]:
    """/metrics on its own port when GPU_TRIAGE_METRICS_PORT asks; how to stop it."""
    if port is None:
        return lambda: None
    try:
        stop: Callable[[], None] = metrics.serve(host=host, port=port)
    except OSError as e:
        app.close()
        raise UserError(f"cannot listen on {host}:{port} for metrics: {e.strerror}") from None
    return stop


def _policy(settings: Settings) -> AccessPolicy:
    """The access policy, its ids checked as Slack's; a warning when it lets nobody in."""
    from bot.core.policy import PolicyError
    from bot.slack.ids import load_policy
    from bot.slack.messages import NO_POLICY_NOTICE

    try:
        policy = load_policy(settings.access_policy)
    except PolicyError as e:
        raise UserError(f"{e} (GPU_TRIAGE_ACCESS_POLICY)") from None
    if policy.empty:
        log.warning("%s", NO_POLICY_NOTICE)
    return policy


def _playbook(settings: Settings) -> Playbook:
    """The playbook, its owner routes' user groups checked as Slack's (the engine takes any)."""
    from bot.slack.ids import PlaybookIdError, check_playbook
    from triage import load_playbook

    playbook = load_playbook(settings.playbook)
    try:
        check_playbook(playbook)
    except PlaybookIdError as e:
        raise UserError(str(e)) from None
    return playbook


def _store(settings: Settings) -> IncidentStore:
    """The incident store, migrated at start unless GPU_TRIAGE_AUTO_MIGRATE is off (e.g. when
    a deployment runs `gpu-triage db upgrade` as a separate step)."""
    store = settings.open_store(migrate=True)
    read_only = store.check_writable()
    if read_only is not None:
        # Degraded, not refused: commands are answered (and say they were not recorded), the
        # incident history can be read, /readyz says so.
        log.warning("%s: running degraded, nothing is recorded", read_only)
    return store


def _app(
    settings: Settings, *, service: TriageService, store: IncidentStore, policy: AccessPolicy
) -> TriageApp:
    """The Slack app; Slack refusing the token (auth.test at start) is one line."""
    from slack_bolt.error import BoltError
    from slack_sdk.errors import SlackApiError, SlackClientError

    from bot.slack.app import create_app

    assistant = _assistant(settings, service)
    try:
        return create_app(settings, service=service, store=store, policy=policy,
                          assistant=assistant, client=slack_client(settings))  # fmt: skip
    except (BoltError, SlackApiError, SlackClientError, OSError) as e:
        raise UserError(
            f"Slack rejected SLACK_BOT_TOKEN or is unreachable: {_one_line(e)}"
        ) from None


def _server(
    app: TriageApp,
    *,
    args: argparse.Namespace,
    settings: Settings,
    metrics: Metrics,
    clusters: Clusters,
    notice: str | None,
) -> Server:
    from bot.slack.server import Server

    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token else None
    apart = settings.metrics_port is not None
    if apart and settings.metrics_port == settings.port:
        app.close()
        raise UserError("GPU_TRIAGE_METRICS_PORT is malformed: must differ from PORT")
    try:
        return Server(
            app,
            host=args.host,
            port=settings.port,
            metrics=None if apart else metrics.render,
            app_token=app_token,
            not_ready=clusters.not_ready,
            threads=settings.http_threads,
            notice=notice,
        )
    except OSError as e:
        app.close()
        raise UserError(f"cannot listen on {args.host}:{settings.port}: {e.strerror}") from None


def _alert_loop(
    app: TriageApp,
    alerts: AlertConfig,
    *,
    service: TriageService,
    metrics: Metrics,
    clusters: Clusters,
) -> AlertLoop:
    """Watch mode: every interval a sweep of each watched cluster, alerts posted to Slack."""
    from bot.core.alerts import Alerter
    from bot.slack.alerts import SlackAlerts
    from gpu_triage.alerting import AlertLoop

    assert service.store is not None
    alerter = Alerter(sink=SlackAlerts(app.client), groups=service.store.groups, config=alerts)
    return AlertLoop(
        service=service,
        alerter=alerter,
        metrics=metrics,
        interval=alerts.interval_seconds,
        clusters=clusters.watched,
    )


def _alerts_config(path: str | None) -> AlertConfig | None:
    """The alerts file, read and checked at start (None: watch mode off)."""
    if not path:
        return None
    from bot.core.alerts import AlertConfigError, load_alerts

    try:
        return load_alerts(path)
    except AlertConfigError as e:
        raise UserError(str(e)) from None


def _assistant(settings: Settings, service: TriageService) -> Assistant:
    """`/gpu ask` and triage summaries; a chat model only if GPU_TRIAGE_LLM_PROVIDER is set.
    Its checks read through the bot's own service, in the cluster each question is about."""
    from assist.ask import Assistant
    from assist.provider import ProviderError, model_from_env

    try:
        model = model_from_env(settings.llm)
    except ProviderError as e:
        raise UserError(str(e)) from None
    if model is not None:
        log.info("assistant: chat model %s configured", type(model).__name__)
    return Assistant(backend=service, model=model)


@dataclass
class Clusters:
    """What the bot serves: a source per `--cluster` name, and how to watch over it."""

    source_for: Callable[[str | None], ClusterSource]
    description: str
    close: Callable[[], None]
    caches: Callable[[], Mapping[str, CachedSource]] | None = None  # live: for /metrics
    not_ready: Callable[[], str | None] = lambda: None  # why /readyz says 503, if it does
    watched: Callable[[], list[str | None]] = lambda: [None]  # swept for alerts
    statuses: Callable[[], list[SourceStatus]] | None = None  # for /gpu clusters (live)


def _sources(
    settings: Any, args: argparse.Namespace, config: EngineConfig | None = None
) -> Clusters:
    """A snapshot serves one cluster. Live, the clusters are kubeconfig contexts, each with a
    watch-backed cache so that a warm triage costs one API request (its events), warmed up
    under `config` once synced.

    With GPU_TRIAGE_CLUSTERS the bot serves exactly those contexts: every cache starts
    syncing now, every one is swept for alerts, and `--cluster` names one of them (the first
    is the default). Without it the current context is the default and any other context of
    the kubeconfig gets its cache on first use.
    """
    from gpu_triage.sources import open_source

    if settings.snapshot:
        source = open_source(snapshot=settings.snapshot)
        names = {None, source.cluster_name, settings.cluster_name}

        def from_snapshot(cluster: str | None) -> ClusterSource:
            if cluster not in names:
                raise LookupError(cluster)
            return source

        return Clusters(from_snapshot, source.cluster_name, lambda: None)

    from kube.cache import CachedSource, ClusterRegistry
    from kube.client import kube_contexts
    from kube.errors import ConfigError
    from triage import EngineConfig, prepare

    engine_config = config or EngineConfig()

    watch = _cluster_list(getattr(settings, "clusters", None), args.kubeconfig, kube_contexts)
    registry = ClusterRegistry(
        kubeconfig=args.kubeconfig,
        default=args.context,
        watch=watch,
        factory=lambda client: CachedSource(
            client,
            # a triage on a cluster whose cache is not synced yet waits this long, then says so
            sync_timeout=SYNC_WAIT,
            watch_list=getattr(settings, "watch_list", True),
            # once synced, every node's health is judged and each waiting pod shape's nodes
            # evaluated ahead: the first question is answered as fast as the next
            on_synced=lambda cache: prepare(cache, config=engine_config),
        ),
    )
    default = registry.source(None)  # config errors surface now, as a startup error
    aliases = {settings.cluster_name} if settings.cluster_name else set()
    served = set(watch) | {default.cluster_name}

    def live(cluster: str | None) -> ClusterSource:
        if cluster in aliases:
            cluster = None
        if watch and cluster is not None and cluster not in served:
            raise LookupError(cluster)  # only the listed clusters: "I don't serve …"
        try:
            return registry.source(cluster)
        except ConfigError:
            if cluster is not None and cluster not in kube_contexts(args.kubeconfig):
                raise LookupError(cluster) from None  # a typo, not a broken context
            raise

    started = time.monotonic()

    def not_ready() -> str | None:
        # Ready once every served cluster has synced; or, after START_GRACE, once any has:
        # a cluster that is unreachable or hangs then answers so, and must not keep the
        # others from being served (a brief 500 at start-up is still waited for).
        found = registry.statuses()
        behind = [s.name for s in found if s.state not in ("synced", "stale")]
        if not behind or (len(behind) < len(found) and time.monotonic() - started >= START_GRACE):
            return None
        return f"cluster {', '.join(behind)}: cache still syncing"

    return Clusters(
        live,
        f"{', '.join(watch) if watch else default.cluster_name} (live, watch-backed)",
        registry.close,
        caches=registry.sources,
        not_ready=not_ready,
        watched=lambda: list(registry.watched()),
        statuses=registry.statuses,
    )


SYNC_WAIT = 10.0  # seconds a triage waits for a cluster's first sync before answering "syncing"
START_GRACE = 60.0  # seconds after start one cluster's first sync may hold up /readyz


def _cluster_list(
    text: str | None, kubeconfig: str | None, contexts: Callable[[str | None], list[str]]
) -> list[str]:
    """GPU_TRIAGE_CLUSTERS as context names ("all": every context the bot can reach)."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if names == ["all"]:
        names = contexts(kubeconfig)
        if not names:
            raise UserError("GPU_TRIAGE_CLUSTERS=all, but no kubeconfig context was found")
    return names


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
