"""`create_app`: the Slack adapter, a slack-bolt app whose listeners convert a request, hand it
to the core's dispatcher (`bot.core.dispatch`) and acknowledge it.

Listeners are thin: read the payload, `ack()` at once (with the text the dispatcher gives),
call the dispatcher. One synchronous execution model (the kubernetes client is synchronous),
no async twin, no module-level state: everything hangs off the returned `TriageApp`, which
`close()` shuts down. The core answers through `bot.slack.chat` in the words of
`bot.slack.messages` and the Block Kit of `bot.slack.render`.

Retries and replicas: a middleware (`bot.slack.dedupe`) drops repeated deliveries and leases
each command to the replica that took it (`bot.core.relay`), without making the ack wait on
the database. A job another replica left is replayed from its Slack payload (`_replay`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import SecretStr
from slack_bolt import Ack, App, BoltContext, BoltRequest, BoltResponse, Respond
from slack_sdk import WebClient

from bot.core.chat import Pressed
from bot.core.commands import Command
from bot.core.context import Context
from bot.core.dispatch import Dispatcher
from bot.core.policy import AccessPolicy, UsergroupCache
from bot.core.ports import CoreSettings, IncidentStoreLike, TriageServiceLike
from bot.core.refs import Action
from bot.core.registry import parse
from bot.slack import messages, render
from bot.slack.chat import SlackChat, SlackReply
from bot.slack.dedupe import Deduper
from bot.slack.intake import Intake
from bot.slack.messages import COMMAND
from incidents.values import Job

if TYPE_CHECKING:
    from assist.ask import Assistant

RESPONSE_URL_AGE = timedelta(minutes=25)  # Slack's response URLs last 30 minutes


class SlackSettings(CoreSettings, Protocol):
    """What the Slack app reads from the settings (`gpu_triage.settings.Settings`)."""

    slack_bot_token: SecretStr
    max_body_bytes: int

    @property
    def signing_secret(self) -> str: ...

    @property
    def api_base_url(self) -> str: ...

    @property
    def response_url_prefixes(self) -> tuple[str, ...]: ...


class TriageApp(App):
    """A bolt `App` that owns the core it serves: the dispatcher (worker pool, relay) and
    the context its handlers share."""

    core: Context
    dispatcher: Dispatcher
    chat: SlackChat
    intake: Intake

    def close(self, *, wait: bool = True) -> None:
        """Stop taking work and wait for running triages to post their answers."""
        self.dispatcher.close(wait=wait)


def create_app(
    settings: SlackSettings,
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
    slack = client
    app = TriageApp(
        signing_secret=settings.signing_secret,
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
    app.chat = SlackChat(client)
    app.core = Context(
        chat=app.chat,
        words=messages,
        render=render,
        service=service,
        store=store,
        policy=policy,
        groups=UsergroupCache(
            groups=policy.usergroups(),
            fetch=lambda group: list(
                slack.usergroups_users_list(usergroup=group).get("users") or []
            ),
            ttl=usergroup_ttl,
        ),
        assistant=assistant,  # assist.ask.Assistant: `/gpu ask` beyond the FAQ, and summaries
    )
    app.dispatcher = Dispatcher(
        app.core,
        settings=settings,
        replay=lambda job: _replay(app.dispatcher, job),
        max_age=RESPONSE_URL_AGE,
    )
    app.intake = Intake(
        secret=settings.signing_secret,
        max_body=settings.max_body_bytes,
        response_urls=settings.response_url_prefixes,
    )
    _listen(app, app.dispatcher)
    app.dispatcher.start()
    return app


def _listen(app: TriageApp, dispatcher: Dispatcher) -> None:
    """The middleware and the listeners: each converts a Slack request for the dispatcher."""
    deduper = Deduper(
        deliveries=app.core.store.deliveries, relay=dispatcher.relay, calls=dispatcher.calls
    )

    @app.middleware
    def drop_repeats(
        req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        return deduper.middleware(req, resp, next)

    @app.command(COMMAND)
    def on_command(
        ack: Ack, command: dict[str, Any], respond: Respond, context: BoltContext
    ) -> None:
        key = context.get("job")
        reception = dispatcher.receive(str(command.get("text") or ""))
        if reception.reply is None:
            ack()
        else:
            ack(text=reception.reply, response_type="ephemeral")
        if reception.command is None:
            dispatcher.finished(key)
            return
        asker = dispatcher.asker(
            user=command["user_id"],
            channel=command.get("channel_id"),
            private=SlackReply(respond),
            key=key,
        )
        dispatcher.command(asker, reception.command, key)

    @app.event("app_mention")
    def on_mention(event: dict[str, Any], context: BoltContext) -> None:
        key = context.get("job")
        asker = dispatcher.asker(
            user=str(event.get("user") or ""),
            channel=event.get("channel"),
            thread=event.get("thread_ts") or event.get("ts"),
            key=key,
        )
        dispatcher.mention(asker, without_mentions(str(event.get("text") or "")), key)

    def on_button(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        dispatcher.press(pressed(body, respond))

    for action in Action:
        app.action(action.value)(on_button)


def pressed(body: dict[str, Any], respond: Respond) -> Pressed:
    """A `block_actions` payload (its shape checked by `bot.slack.shapes`) as a press."""
    action = body["actions"][0]
    container = body.get("container") or {}
    reported = (body.get("channel") or {}).get("id")
    return Pressed(
        action=str(action.get("action_id")),
        value=str(action.get("value") or ""),
        user=body["user"]["id"],
        channel=reported,
        same_channel=container.get("channel_id", reported) == reported,
        on_message=not (bool(container.get("is_ephemeral")) or not body.get("message")),
        private=SlackReply(respond),
    )


def _replay(dispatcher: Dispatcher, job: Job) -> None:
    """A job another replica took and did not answer, from the Slack payload it recorded
    (`bot.slack.dedupe.job_of`)."""
    p = job.payload
    if job.kind == "command":
        asker = dispatcher.asker(
            user=str(p.get("user_id") or ""),
            channel=p.get("channel_id"),
            private=SlackReply(Respond(response_url=p.get("response_url"))),
            key=job.key,
        )
        text = str(p.get("text") or "")
    elif job.kind == "mention":
        asker = dispatcher.asker(
            user=str(p.get("user") or ""),
            channel=p.get("channel"),
            thread=p.get("thread_ts"),
            key=job.key,
        )
        text = without_mentions(str(p.get("text") or ""))
    else:
        dispatcher.finished(job.key)
        return
    dispatcher.resume(asker, text, job.key)


def without_mentions(text: str) -> str:
    """An `app_mention`'s text without the leading `<@U…>` mentions."""
    words = text.strip().split()
    while words and words[0].startswith("<@") and words[0].endswith(">"):
        words.pop(0)
    return " ".join(words)


def parse_mention(text: str) -> Command:
    """An `app_mention` text, parsed like a slash command's."""
    return parse(without_mentions(text))
