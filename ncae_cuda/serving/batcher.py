"""Requests gathered onto one scoring call: the users of the requests that arrive within
max_wait seconds of the first (or until max_batch users) are scored by one recommend
call, one `topk` launch a chunk on a GPU, and each request is answered with its own rows. A
request that finds no other waiting is scored at once: with nobody to batch with, waiting would
only add max_wait to its latency (under load, requests queue while a batch is scored); one that
finds no other open at all goes straight to the model's thread, past the queue and the task
that forms batches.

Requests differ in n, in the items they exclude and in keeping seen items. The call asks for
the largest n + len(exclude) among them, and each request keeps its first n items once its
own excluded items are dropped: the ranking is the same for every n (ties go to the earlier
item), so that is the request's own top n. Requests keeping seen items and those filtering
them are two calls, the seen items being a filter of the call itself. A request with more users
than max_batch is a batch of its own.

A bug in scoring a batch fails that batch's requests (500) and no others. What no answer can be
made of (no Exception: a SystemExit, a library's own BaseException) or a fault of the task that
forms batches stops the batcher: the requests open then and every later one are answered at once
with BatcherStopped (503) naming it, and /healthz is not ok, rather than waiting for good.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import NcaeError
from ..model.base import Model

log = logging.getLogger("ncae_cuda.serve")

IN_FLIGHT = 2          # batches handed to the model's thread at once: one scored, one queued


@dataclass
class Ask:
    """One request: its users and items as the client wrote their ids."""
    users: list
    n: int
    filter_seen: bool
    exclude: list
    answer: asyncio.Future
    arrived: float = field(default_factory=lambda: asyncio.get_running_loop().time())


class BatcherStopped(NcaeError, RuntimeError):
    """The batcher has stopped (see the module's docstring): /recommend cannot be answered
    until the server is restarted."""


class Batcher:
    """Gathers asks into batches and scores each batch on the holder's model thread."""

    def __init__(self, holder, max_batch: int, max_wait_s: float):
        self.holder, self.max_batch, self.max_wait_s = holder, max_batch, max_wait_s
        self.queue: asyncio.Queue[Ask] = asyncio.Queue()
        self.batches = self.users = 0      # scored so far, as /healthz shows them
        self.open = 0                      # asks received and not yet answered
        self.answers: set[asyncio.Future] = set()   # theirs, failed if the batcher stops
        self.failure: str | None = None    # why the batcher stopped, once it has

    async def recommend(self, users: list, n: int, filter_seen: bool, exclude: list) -> list:
        """One result a user: {"user", "items", "scores"}; UnknownIds naming what the model
        does not know; BatcherStopped once the batcher has stopped."""
        if self.failure is not None:
            raise BatcherStopped(self.failure)
        ask = Ask(users, n, filter_seen, exclude, asyncio.get_running_loop().create_future())
        self.open += 1
        self.answers.add(ask.answer)
        try:
            if self.open == 1:          # none other open: a batch of one, no queue between
                await self._score([ask])
            else:
                self.queue.put_nowait(ask)
            return await ask.answer
        finally:
            self.open -= 1
            self.answers.discard(ask.answer)

    def start(self) -> asyncio.Task:
        """run() as a task whose fault stops the batcher (it ends only so, or cancelled at
        shutdown)."""
        task = asyncio.create_task(self.run())
        task.add_done_callback(lambda done: done.cancelled() or self._stop(done.exception()))
        return task

    def _stop(self, error: BaseException) -> None:
        """Answer every open ask, and each later one, with BatcherStopped naming `error`."""
        log.error("the batcher stopped: /recommend is answered 503 until the server is "
                  "restarted", exc_info=error)
        self.failure = (f"the server's batcher stopped ({type(error).__name__}: {error}): "
                        "/recommend cannot be answered; restart the server")
        for answer in self.answers:
            if not answer.done():
                answer.set_exception(BatcherStopped(self.failure))

    async def run(self) -> None:
        """Score batches until cancelled (at shutdown, once the requests have been answered).
        A batch is formed while the one before it is scored, and queued behind it on the
        model's thread, so that the thread does not wait for the next batch to be formed; the
        one after that is formed once a batch is done, of every request queued meanwhile."""
        held = None                 # an ask that would have overfilled the last batch
        slots = asyncio.Semaphore(IN_FLIGHT)
        scoring = set()             # the batches' tasks, held until done
        while True:
            await slots.acquire()
            batch = [held or await self.queue.get()]
            held = await self._fill(batch)
            task = asyncio.create_task(self._score(batch))
            scoring.add(task)
            task.add_done_callback(lambda done: (scoring.discard(done), slots.release()))

    async def _score(self, batch: list[Ask]) -> None:
        """Score one batch on the model's thread and answer each of its asks."""
        try:
            answers = await self.holder.run(score_batch, batch, self.holder.index)
        except Exception as e:      # noqa: BLE001 (a bug: these requests answer 500, no others)
            answers = [e] * len(batch)
        except asyncio.CancelledError:      # a batch of one whose client went away
            raise
        except BaseException as e:  # noqa: BLE001 (no answer is made of it: see the docstring)
            self._stop(e)
            return
        self.batches += 1
        self.users += sum(len(ask.users) for ask in batch)
        for ask, answer in zip(batch, answers):
            if ask.answer.done():                   # the client went away
                continue
            if isinstance(answer, BaseException):
                ask.answer.set_exception(answer)
            else:
                ask.answer.set_result(answer)

    async def _fill(self, batch: list[Ask]) -> Ask | None:
        """Add the asks that arrive until max_wait after the first one or max_batch users;
        returns an ask that did not fit, for the next batch."""
        loop, size = asyncio.get_running_loop(), len(batch[0].users)
        deadline = batch[0].arrived + self.max_wait_s
        while size < self.max_batch:
            if self.queue.empty() and self.open <= len(batch):    # none other is waiting
                return None
            left = deadline - loop.time()
            try:          # what is queued first; a wait (a task and a timer) only for more
                ask = (self.queue.get_nowait() if left <= 0 or not self.queue.empty() else
                       await asyncio.wait_for(self.queue.get(), left))
            except (asyncio.QueueEmpty, asyncio.TimeoutError):
                return None
            if size + len(ask.users) > self.max_batch:
                return ask
            batch.append(ask)
            size += len(ask.users)
        return None


def score_batch(model: Model, batch: list[Ask], index: str = "exact") -> list:
    """Each ask's rows, or the error it is answered with (unknown ids; an ask whose ids meet a
    bug fails alone), from one recommend call (through `index`) for all the users of the asks
    that filter seen items and one for those that keep them."""
    answers: list = [None] * len(batch)
    calls: dict[bool, list] = {True: [], False: []}
    looked_up = _batch_users(model, batch)
    for k, ask in enumerate(batch):
        try:
            users = (looked_up[k] if looked_up is not None
                     else model.data.user_lookup(ask.users))                     # (U,)
            excluded = (model.item_ids[model.data.item_lookup(ask.exclude)]
                        if ask.exclude else NONE)
        except Exception as e:      # noqa: BLE001 (a client's mistake, or a bug: this ask's)
            answers[k] = e
            continue
        calls[ask.filter_seen].append((k, users, excluded))
    for filter_seen, asks in calls.items():
        if not asks:
            continue
        rows = np.concatenate([users for _, users, _ in asks])                   # (B,)
        n = max(batch[k].n + len(excluded) for k, _, excluded in asks)
        items, scores = model.recommend(model.user_ids[rows], n=n,
                                        filter_seen=filter_seen, index=index)   # (B, n) each
        start = 0
        for k, users, excluded in asks:
            answers[k] = [{"user": user, **ranked(items[start + j], scores[start + j],
                                                  batch[k].n, excluded)}
                          for j, user in enumerate(model.user_ids[users].tolist())]
            start += len(users)
    return answers


def _batch_users(model: Model, batch: list[Ask]) -> list[np.ndarray] | None:
    """Each ask's users' indices, the ids of the whole batch looked up in one call; None where
    one of them is unknown, and each ask is looked up apart."""
    try:
        every = model.data.user_lookup([u for ask in batch for u in ask.users])
    except Exception:               # noqa: BLE001 (each ask's own lookup says which, and why)
        return None
    return np.split(every, np.cumsum([len(ask.users) for ask in batch])[:-1])


NONE = np.zeros(0, np.int64)       # no item excluded


def ranked(items: np.ndarray, scores: np.ndarray, n: int, excluded=NONE) -> dict:
    """One row of a ranking as JSON: its first n items not excluded, without the padding of a
    row with fewer candidates (score -inf)."""
    keep = np.isfinite(scores)                                              # (n',)
    if len(excluded):
        keep &= ~np.isin(items, excluded)
    return {"items": items[keep][:n].tolist(), "scores": scores[keep][:n].tolist()}
