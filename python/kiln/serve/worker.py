"""The one thread that owns the BatchRunner: it loops step() while there is work, waits on a
condition otherwise, and hands each event to the asyncio queue of the HTTP request it belongs to.

step() releases the GIL for the forward call, so the event loop keeps serving meanwhile. Token
masks of constrained requests (kiln.serve.constraints) are computed here, between two steps,
right after the event that carries the token they follow.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("kiln.serve")


class QueueFull(Exception):
    pass


class ShuttingDown(Exception):
    pass


class Subscriber:
    """Where one engine request's events go: (loop, asyncio.Queue), tagged with `index` (the choice)."""

    __slots__ = ("loop", "queue", "index", "constraint", "submitted", "last_token", "tokens", "done")

    def __init__(self, loop, queue, index, constraint):
        self.loop, self.queue, self.index, self.constraint = loop, queue, index, constraint
        self.submitted = time.perf_counter()
        self.last_token = None
        self.tokens = 0
        self.done = False


class Worker:
    def __init__(self, batch, metrics, *, max_queue: int):
        self.batch = batch
        self.metrics = metrics
        self.max_queue = max_queue
        self.cond = threading.Condition()
        self.subs: dict = {}  # rid -> Subscriber
        self.stopping = False
        self.steps = 0
        self.failure: str | None = None
        self.thread = threading.Thread(target=self._run, name="kiln-serve-worker", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def shutdown(self) -> None:
        """Refuses new requests and cancels those in flight (their clients get a 503 or an error event)."""
        with self.cond:
            self.stopping = True
            for rid in list(self.subs):
                self.batch.cancel(rid)
            self.cond.notify_all()

    def stop(self) -> None:
        self.shutdown()
        if self.thread.is_alive():
            self.thread.join(timeout=30)

    def submit(self, jobs: list, loop, queue) -> list:
        """Submits all `jobs` [(prompt, options, constraint or None)] or none (QueueFull when they do
        not fit in the queue; kiln.InvalidArgument from submit cancels those already in). Returns
        the rids, job i's events tagged with index i."""
        with self.cond:
            if self.stopping:
                raise ShuttingDown("the server is shutting down")
            # Those that will wait for a slot once the free ones are taken (submitted requests count
            # as queued until the next step admits them).
            waiting = self.batch.queued + len(jobs) - max(0, self.batch.slots - self.batch.active)
            if waiting > self.max_queue:
                raise QueueFull(f"the queue is full (at most {self.max_queue} requests wait for a slot)")
            rids = []
            try:
                for i, (prompt, options, constraint) in enumerate(jobs):
                    rid = self.batch.submit(prompt, constrained=constraint is not None, **options)
                    rids.append(rid)
                    self.subs[rid] = Subscriber(loop, queue, i, constraint)
                    if constraint is not None:
                        self.batch.set_token_mask(rid, constraint.mask())
            except BaseException:
                for rid in rids:
                    self.batch.cancel(rid)
                    self.subs.pop(rid, None)
                raise
            self.cond.notify()
        return rids

    def cancel(self, rids) -> None:
        """The client went away: the requests end at the next step (finish_reason "cancelled")."""
        with self.cond:
            for rid in rids:
                if rid in self.subs:
                    self.batch.cancel(rid)
            self.cond.notify()

    @property
    def in_flight(self) -> int:
        with self.cond:
            return len(self.subs)

    def _run(self) -> None:
        batch = self.batch
        while True:
            with self.cond:
                while not self.stopping and not batch.has_work:
                    self.cond.wait()
                if self.stopping and not batch.has_work:
                    return
            try:
                events = batch.step()
            except Exception as e:  # the engine failed: every request in flight gets the error
                log.exception("BatchRunner.step failed")
                self._fail(f"{type(e).__name__}: {e}")
                continue
            self.steps += 1
            if events:
                self._dispatch(events)

    def _fail(self, message: str) -> None:
        with self.cond:
            subs, self.subs = self.subs, {}
            for rid, sub in subs.items():
                self.batch.cancel(rid)
                _post(sub, (sub.index, None, message))

    def _dispatch(self, events) -> None:
        now = time.perf_counter()
        with self.cond:
            for ev in events:
                sub = self.subs.get(ev.request)
                if sub is None:
                    continue
                if ev.token >= 0:
                    if sub.last_token is None:
                        self.metrics.first_token(now - sub.submitted)
                    else:
                        self.metrics.inter_token(now - sub.last_token)
                    sub.last_token = now
                    sub.tokens += 1
                    if sub.constraint is not None and not ev.finished:
                        try:
                            mask = sub.constraint.advance(ev.token)
                        except Exception as e:  # noqa: BLE001 (a grammar failure ends this request only)
                            log.warning("constraint of request %d failed: %s", ev.request, e)
                            mask = sub.constraint.stop_mask()
                        self.batch.set_token_mask(ev.request, mask)
                if ev.finished:
                    del self.subs[ev.request]
                    stats = ev.stats or {}
                    self.metrics.finish(ev.finish_reason, int(stats.get("prompt_tokens", 0)),
                                        int(stats.get("generated_tokens", sub.tokens)))
                _post(sub, (sub.index, ev, None))


def _post(sub: Subscriber, item) -> None:
    try:
        sub.loop.call_soon_threadsafe(sub.queue.put_nowait, item)
    except RuntimeError:  # the event loop has closed (shutdown)
        pass
