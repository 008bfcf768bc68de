"""The one way in: every command, mention, replayed job and button press from a chat's adapter
goes through the `Dispatcher`, which runs it once, off the chat's request path, on the bounded
worker pool (or hands it to the replica serving its cluster).

The adapter converts a request (parse the chat's payload, acknowledge it in time) and calls
one method here: `receive` for what to acknowledge a command with, `command`, `mention`,
`resume` for a job another replica left, `press` for a button. Which handler answers a command
is the registry's (`bot.core.registry`); which a button, its action (`bot.core.refs.Action`).

Retries and replicas: a command is a job keyed by its delivery (`key`), leased to this replica
by the relay (`bot.core.relay`); every reply passes its gate (one replica answers), and once
answered it is marked done. A command whose record failed is answered here, and every reply to
it says it was not recorded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from bot.core.chat import Asker, Pressed, Private
from bot.core.commands import Command, UsageError
from bot.core.context import Context
from bot.core.deadline import DatabaseCalls
from bot.core.handlers import Handlers
from bot.core.ports import CoreSettings
from bot.core.refs import REPORT_ACTIONS, Action
from bot.core.registry import Then, parse, verb_of
from bot.core.relay import MAX_AGE, Relay
from bot.core.work import Flights, WorkerPool
from incidents.errors import IncidentStoreError
from incidents.values import Job
from triage import InvalidNameError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reception:
    """What a command is acknowledged with (None: an empty ack), and the command to run
    after the ack (None: the acknowledgement answered it)."""

    reply: str | None
    command: Command | None


class Dispatcher:
    def __init__(
        self,
        ctx: Context,
        *,
        settings: CoreSettings,
        replay: Callable[[Job], None],
        max_age: timedelta = MAX_AGE,
    ) -> None:
        self.ctx = ctx
        self.pool = WorkerPool(workers=settings.workers, max_pending=settings.max_pending)
        # One cluster's triages run on at most all workers but one: a cluster that hangs
        # leaves a worker to the other clusters and to every other command.
        flights = Flights(
            self.pool, per_lane=max(1, settings.workers - 1), limit=settings.max_pending
        )
        self.handlers = Handlers.build(ctx, flights=flights)
        # The delivery record and the reply claim wait at most this long for the database.
        self.calls = DatabaseCalls(
            deadline=settings.delivery_deadline, threads=settings.http_threads
        )
        self.relay = Relay(
            store=ctx.store,
            served=ctx.service.clusters,
            replay=replay,
            room=lambda: not self.pool.closed,
            owner=settings.replica_id,
            lease=settings.job_lease,
            poll=settings.job_poll,
            calls=self.calls,
            max_age=max_age,
        )
        ctx.remote_clusters = self.relay.remote
        self._actions: dict[str, Callable[[Asker, Pressed], None]] = {
            Action.GROUP_THREAD: lambda asker, p: self.handlers.fleet.open_group(asker, p.value),
            **{a: lambda _asker, p: self.handlers.buttons.press(p) for a in REPORT_ACTIONS},
        }

    def start(self) -> Dispatcher:
        """Join the other replicas (once the adapter can replay their jobs)."""
        self.relay.start()
        return self

    def close(self, *, wait: bool = True) -> None:
        """Stop taking work and wait for running triages to post their answers."""
        self.pool.shutdown(wait=wait)
        self.relay.close()

    # -- who asked ---------------------------------------------------------------------------
    def asker(
        self,
        *,
        user: str,
        channel: str | None,
        private: Private | None = None,
        thread: str | None = None,
        key: str | None = None,
    ) -> Asker:
        """Who asked; for a command that is a job, every reply passes its relay gate (one
        replica answers) and carries its "not recorded" note."""
        place = self.ctx.policy.answer_place(channel)
        if key is None:
            return Asker(user=user, channel=channel, private=private, thread=thread, place=place)

        def note() -> str | None:
            fault = self.relay.fault(key)
            return None if fault is None else self.ctx.words.not_recorded(fault)

        return Asker(
            user=user,
            channel=channel,
            private=private,
            thread=thread,
            may_reply=self.relay.gate(key),
            note=note,
            place=place,
        )

    # -- ways in -----------------------------------------------------------------------------
    def receive(self, text: str) -> Reception:
        """A command's text, on the request's thread: what to acknowledge it with at once,
        and the command to `command` afterwards."""
        words = self.ctx.words
        try:
            cmd = parse(text)
        except (UsageError, InvalidNameError) as e:
            return Reception(words.malformed(str(e)), None)
        verb = verb_of(cmd)
        if verb.at_once:
            return Reception(words.help_text(), None)
        if self.ctx.policy.empty:
            return Reception(words.no_policy(), None)
        ack = verb.acknowledgement
        return Reception(None if ack is None else ack(words, cmd), cmd)

    def command(self, asker: Asker, cmd: Command, key: str | None) -> None:
        """Run an acknowledged command here, or hand it to the replica serving its cluster."""
        cluster = cmd.cluster or self.ctx.policy.cluster_for(asker.channel)
        if (
            key is not None
            and cluster is not None
            and not self._serves(cluster)
            and self.relay.elsewhere(cluster)
            and self.relay.hand_off(key, cluster)
        ):
            log.info("job %s handed to a replica serving cluster %s", key, cluster)
            return
        self._run(asker, cmd, key)

    def mention(self, asker: Asker, text: str, key: str | None) -> None:
        """The bot named in a channel or thread, with `text` (the mention itself removed)."""
        if self.ctx.policy.empty:
            self.later(asker, lambda then: self.ctx.say(asker, self.ctx.words.no_policy()), key=key)
            return
        try:
            cmd = parse(text)
        except (UsageError, InvalidNameError) as e:
            problem = self.ctx.words.malformed(str(e))
            self.later(asker, lambda then: self.ctx.say(asker, problem), key=key)
            return
        self.command(asker, cmd, key)

    def resume(self, asker: Asker, text: str, key: str) -> None:
        """A job another replica took and did not answer (it died, or handed it here)."""
        try:
            cmd = parse(text)
        except (UsageError, InvalidNameError):
            self.finished(key)  # answered when it came in
            return
        if verb_of(cmd).at_once:
            self.finished(key)  # answered in the acknowledgement already
            return
        if self.ctx.policy.empty:  # the policy went away with the replica's restart
            self.later(asker, lambda then: self.ctx.say(asker, self.ctx.words.no_policy()), key=key)
            return
        self.command(asker, cmd, key)

    def press(self, pressed: Pressed) -> None:
        """A button, acknowledged already: run on the pool, by its action."""
        asker = Asker(user=pressed.user, channel=pressed.channel, private=pressed.private)
        act = self._actions.get(pressed.action)
        if self.ctx.policy.empty:
            self.later(asker, lambda then: self.ctx.say(asker, self.ctx.words.no_policy()))
        elif act is not None:
            self.later(asker, lambda then: act(asker, pressed))

    def finished(self, key: str | None) -> None:
        """Job `key` was answered (or needs no answer)."""
        if key is not None:
            self.relay.done(key)

    # -- running -----------------------------------------------------------------------------
    def _run(self, asker: Asker, cmd: Command, key: str | None) -> None:
        verb = verb_of(cmd)
        done = self._once(key)

        def run(then: Then) -> None:
            verb.run(self.handlers, asker, cmd, then)

        if not verb.on_listener:
            self.later(asker, run, key=key, done=done, answers_later=verb.answers_later)
            return
        try:
            run(done)
        except Exception:
            log.exception("%s failed before its work started", verb.name)
            done()

    def later(
        self,
        asker: Asker,
        job: Callable[[Then], None],
        *,
        key: str | None = None,
        done: Then | None = None,
        answers_later: bool = False,
    ) -> None:
        """Run `job(then)` on the worker pool, telling `asker` when it fails or the pool is
        full. `then` (the job is answered) is called when `job` returns, unless the job
        `answers_later` and calls it itself."""
        then = done or self._once(key)

        def guarded() -> None:
            failed = True
            try:
                job(then)
                failed = False
            except IncidentStoreError as e:
                self.ctx.store_failed(asker, e)
            except Exception:
                log.exception("request failed")
                try:
                    self.ctx.say(asker, self.ctx.words.internal_error())
                except Exception:
                    log.exception("could not tell the user about the failure")
            finally:
                if failed or not answers_later:
                    then()

        if self.pool.try_submit(guarded) is None:
            self.ctx.say(asker, self.ctx.words.busy())
            then()

    def _once(self, key: str | None) -> Then:
        """`finished(key)`, at most once however often it is called."""
        lock, called = threading.Lock(), [False]

        def then() -> None:
            with lock:
                if called[0]:
                    return
                called[0] = True
            self.finished(key)

        return then

    def _serves(self, cluster: str) -> bool:
        try:
            self.ctx.service.cluster_name(cluster)
        except LookupError:
            return False
        except Exception:  # a context that does not load is still ours to answer about
            return True
        return True
