"""`create_app`: the slack-bolt app wiring listeners to the handlers.

Listeners are thin: parse, `ack()` at once, hand the work to the app's bounded worker pool.
One synchronous execution model (the kubernetes client is synchronous), no async twin, no
module-level state: everything hangs off the returned `TriageApp`, which `close()` shuts down.

Retries and replicas: a middleware (`bot.dedupe`) drops repeated deliveries and leases each
command to the replica that took it (`bot.relay`), without making the ack wait on the
database. A command whose record failed is answered here, and every reply to it says it was
not recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, App, BoltContext, BoltRequest, BoltResponse, Respond
from slack_sdk import WebClient

from bot.core.buttons import Buttons
from bot.core.commands import (
    Ask,
    Command,
    Help,
    InvalidNameError,
    ListClusters,
    ListIncidents,
    Pending,
    ShowIncident,
    ShowStats,
    UsageError,
    VerifyNode,
    WhyPending,
    parse,
    parse_mention,
)
from bot.core.deadline import DatabaseCalls
from bot.core.fleet import FleetView
from bot.core.handlers import Asker, Handlers
from bot.core.history import History
from bot.core.policy import AccessPolicy, UsergroupCache
from bot.core.ports import BotSettings, IncidentStoreLike, TriageServiceLike
from bot.core.questions import Questions
from bot.core.relay import Relay
from bot.core.work import Flights, WorkerPool
from bot.slack import messages as msg
from bot.slack.blocks import ACTION_ESCALATE, ACTION_RERUN, ACTION_RESOLVE, with_note
from bot.slack.dedupe import Deduper
from bot.slack.fleet import ACTION_GROUP
from bot.slack.intake import Intake
from incidents.errors import IncidentStoreError
from incidents.values import Job

if TYPE_CHECKING:
    from assist.ask import Assistant

log = logging.getLogger(__name__)


class TriageApp(App):
    """A bolt `App` that owns the worker pool the triages run on and the relay that shares
    commands with the other replicas."""

    pool: WorkerPool
    handlers: Handlers
    relay: Relay
    intake: Intake

    def close(self, *, wait: bool = True) -> None:
        """Stop taking work and wait for running triages to post their answers."""
        self.pool.shutdown(wait=wait)
        self.relay.close()


def create_app(
    settings: BotSettings,
    *,
    service: TriageServiceLike,
    store: IncidentStoreLike,
    policy: AccessPolicy,
    client: WebClient | None = None,
    usergroup_ttl: float = 300.0,
    assistant: Assistant | None = None,
) -> TriageApp:
    """Build the bolt app. `client` is the test seam (a WebClient pointed at a fake Slack)."""
    if client is None:
        client = WebClient(
            token=settings.slack_bot_token.get_secret_value(), base_url=settings.api_base_url
        )
    app = TriageApp(
        signing_secret=settings.slack_signing_secret.get_secret_value(),
        client=client,
        process_before_response=False,
        # Listeners run here up to their ack (parse, a policy check, hand off): as many as
        # there are HTTP threads waiting for acks (bolt's default is 5).
        listener_executor=ThreadPoolExecutor(
            max_workers=settings.http_threads, thread_name_prefix="gpu-triage-listener"
        ),
        # auth.test at startup proves the token works before we take traffic.
        token_verification_enabled=True,
    )
    groups = UsergroupCache(
        groups=policy.usergroups(),
        fetch=lambda group: list(client.usergroups_users_list(usergroup=group).get("users") or []),
        ttl=usergroup_ttl,
    )
    handlers = Handlers(
        client=client,
        service=service,
        store=store,
        policy=policy,
        groups=groups,
        assistant=assistant,  # assist.ask.Assistant: `/gpu ask` beyond the FAQ, and summaries
    )
    buttons = Buttons(handlers=handlers)
    fleet_view, history = FleetView(handlers=handlers), History(handlers=handlers)
    questions = Questions(handlers=handlers)
    app.intake = Intake(
        secret=settings.slack_signing_secret.get_secret_value(),
        max_body=settings.max_body_bytes,
        response_urls=settings.response_url_prefixes,
    )
    app.pool = WorkerPool(workers=settings.workers, max_pending=settings.max_pending)
    # One cluster's triages run on at most all workers but one: a cluster that hangs
    # leaves a worker to the other clusters and to every other command.
    flights = Flights(app.pool, per_lane=max(1, settings.workers - 1), limit=settings.max_pending)
    app.handlers = handlers
    # The delivery record and the reply claim wait at most this long for the database.
    calls = DatabaseCalls(deadline=settings.delivery_deadline, threads=settings.http_threads)

    def later(asker: Asker, job: Callable[[], None], *, key: str | None = None) -> None:
        def guarded() -> None:
            try:
                job()
            except IncidentStoreError as e:
                handlers.store_failed(asker, e)
            except Exception:
                log.exception("request failed")
                try:
                    handlers.say(asker, msg.internal_error())
                except Exception:
                    log.exception("could not tell the user about the failure")
            finally:
                finished(key)

        if app.pool.try_submit(guarded) is None:
            handlers.say(asker, msg.busy())
            finished(key)

    def finished(key: str | None) -> None:
        if key is not None:
            app.relay.done(key)

    @app.middleware
    def drop_repeats(
        req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        return deduper.middleware(req, resp, next)

    def asker_for(
        user: str,
        channel: str | None,
        *,
        respond: Respond | None = None,
        thread_ts: str | None = None,
        key: str | None = None,
    ) -> Asker:
        """Who asked; for a command that is a job, every reply passes its relay gate (one
        replica answers)."""
        if key is None:
            return Asker(user=user, channel=channel, respond=respond, thread_ts=thread_ts)
        gate = app.relay.gate(key)

        def note() -> str | None:
            fault = app.relay.fault(key)
            return None if fault is None else msg.not_recorded(fault)

        def gated(**message: Any) -> Any:
            if respond is None or not gate():
                return None
            return respond(**with_note(message, note()))

        return Asker(
            user=user,
            channel=channel,
            respond=None if respond is None else gated,
            thread_ts=thread_ts,
            may_reply=gate,
            note=note,
        )

    def why_pending(asker: Asker, cmd: WhyPending, key: str | None) -> None:
        """On the listener's thread, after the ack: a policy check, then the triage is
        joined or started (`Flights`); nothing here waits for the cluster."""
        try:
            handlers.why_pending_shared(asker, cmd, flights, then=lambda: finished(key))
        except Exception:
            log.exception("why-pending failed before its triage")
            finished(key)

    def start(asker: Asker, cmd: Command, key: str | None) -> None:
        """Run an acknowledged command here, or hand it to the replica serving its cluster."""
        cluster = getattr(cmd, "cluster", None) or policy.cluster_for(asker.channel)
        if (
            key is not None
            and cluster is not None
            and not serves(cluster)
            and app.relay.elsewhere(cluster)
            and app.relay.hand_off(key, cluster)
        ):
            log.info("job %s handed to a replica serving cluster %s", key, cluster)
            return
        if isinstance(cmd, WhyPending):
            why_pending(asker, cmd, key)
        else:
            later(asker, lambda: run_command(asker, cmd), key=key)

    def serves(cluster: str) -> bool:
        try:
            service.cluster_name(cluster)
        except LookupError:
            return False
        except Exception:  # a context that does not load is still ours to answer about
            return True
        return True

    def replay(job: Job) -> None:
        """A job another replica took and did not answer (it died, or handed it here)."""
        p = job.payload
        if job.kind == "command":
            respond = Respond(response_url=p.get("response_url"))
            asker = asker_for(
                str(p.get("user_id") or ""), p.get("channel_id"), respond=respond, key=job.key
            )
            text = str(p.get("text") or "")
            cmd = _parsed(text, parse)
        elif job.kind == "mention":
            asker = asker_for(
                str(p.get("user") or ""),
                p.get("channel"),
                thread_ts=p.get("thread_ts"),
                key=job.key,
            )
            cmd = _parsed(str(p.get("text") or ""), parse_mention)
        else:
            finished(job.key)
            return
        if cmd is None or isinstance(cmd, Help):
            finished(job.key)  # answered in the ack already
            return
        if policy.empty:  # the policy went away with the replica's restart
            later(asker, lambda: handlers.say(asker, msg.no_policy()), key=job.key)
            return
        start(asker, cmd, job.key)

    def run_command(asker: Asker, cmd: Command) -> None:
        if isinstance(cmd, WhyPending):
            handlers.why_pending(asker, cmd)
        elif isinstance(cmd, Pending):
            fleet_view.pending(asker, cmd)
        elif isinstance(cmd, VerifyNode):
            handlers.verify_node(asker, cmd)
        elif isinstance(cmd, ListIncidents):
            history.incidents(asker, cmd)
        elif isinstance(cmd, ShowIncident):
            history.incident(asker, cmd)
        elif isinstance(cmd, ShowStats):
            history.stats(asker, cmd)
        elif isinstance(cmd, ListClusters):
            handlers.clusters(asker)
        elif isinstance(cmd, Ask):
            questions.ask(asker, cmd)
        else:
            handlers.say(asker, msg.help_text())

    @app.command("/gpu")
    def on_gpu(ack: Ack, command: dict[str, Any], respond: Respond, context: BoltContext) -> None:
        try:
            cmd = parse(str(command.get("text") or ""))
        except (UsageError, InvalidNameError) as e:
            ack(text=msg.malformed(str(e)), response_type="ephemeral")
            finished(context.get("job"))
            return
        if isinstance(cmd, Help) or policy.empty:
            text = msg.help_text() if isinstance(cmd, Help) else msg.no_policy()
            ack(text=text, response_type="ephemeral")
            finished(context.get("job"))
            return
        if isinstance(cmd, WhyPending):
            ack(
                text=msg.working(namespace=cmd.namespace or "…", name=cmd.name),
                response_type="ephemeral",
            )
        else:
            ack()
        key = context.get("job")
        asker = asker_for(command["user_id"], command.get("channel_id"), respond=respond, key=key)
        start(asker, cmd, key)

    @app.event("app_mention")
    def on_mention(event: dict[str, Any], context: BoltContext) -> None:
        key = context.get("job")
        asker = asker_for(
            str(event.get("user") or ""),
            event.get("channel"),
            thread_ts=event.get("thread_ts") or event.get("ts"),
            key=key,
        )
        if policy.empty:
            later(asker, lambda: handlers.say(asker, msg.no_policy()), key=key)
            return
        try:
            cmd = parse_mention(str(event.get("text") or ""))
        except (UsageError, InvalidNameError) as e:
            problem = msg.malformed(str(e))
            later(asker, lambda: handlers.say(asker, problem), key=key)
            return
        start(asker, cmd, key)

    for action_id in (ACTION_RERUN, ACTION_RESOLVE, ACTION_ESCALATE):

        @app.action(action_id)
        def on_button(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
            ack()
            asker = Asker(
                user=body["user"]["id"],
                channel=(body.get("channel") or {}).get("id"),
                respond=respond,
            )
            if policy.empty:
                later(asker, lambda: handlers.say(asker, msg.no_policy()))
                return
            later(asker, lambda: buttons.press(body=body, respond=respond))

    @app.action(ACTION_GROUP)
    def on_group(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        asker = Asker(
            user=body["user"]["id"],
            channel=(body.get("channel") or {}).get("id"),
            respond=respond,
        )
        value = str(((body.get("actions") or [{}])[0]).get("value") or "")
        if policy.empty:
            later(asker, lambda: handlers.say(asker, msg.no_policy()))
            return
        later(asker, lambda: fleet_view.open_group(asker, value))

    app.relay = Relay(
        store=store,
        served=service.clusters,
        replay=replay,
        room=lambda: not app.pool.closed,
        owner=settings.replica_id,
        lease=settings.job_lease,
        poll=settings.job_poll,
        calls=calls,
    ).start()
    deduper = Deduper(deliveries=store.deliveries, relay=app.relay, calls=calls)
    handlers.remote_clusters = app.relay.remote
    return app


def _parsed(text: str, parser: Callable[[str], Command]) -> Command | None:
    try:
        return parser(text)
    except (UsageError, InvalidNameError):
        return None  # answered when it came in
