"""The checker's own client on a student's kernel: one execute request runs the agent
(:mod:`course_utils.protocol.agent`), then one ``input()`` round trip per question. Everything the
kernel sends is bounded (one message, all messages of a test cell) and garbage is an error here."""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from typing import Any

AGENT_CODE = "__import__('course_utils.protocol.agent', fromlist=['serve']).serve()"
_MAX_MESSAGE = 400 * 2**20
# all messages of one test cell together: what the checker may have to hold (the red team kept
# 15 tensors of 250 MiB alive through one answer's `.shape`); the course's largest cell uses ~40 MiB
_MAX_RECEIVED = int(os.environ.get("COURSE_CHECKER_MAX_BYTES", str(768 << 20)))


class CheckerError(RuntimeError):
    """The kernel did not answer the checker as the protocol says (a crash, a time-out, garbage)."""


class CheckerTimeout(CheckerError):
    """The test cell's deadline passed while the kernel was computing (the kernel is then stopped)."""



# --------------------------------------------------------------------------- the link


class KernelLink:
    """The checker's own client on the kernel: one execute request that runs the agent,
    then one ``input()`` round trip per question."""

    def __init__(self, connection_info: dict, deadline: float) -> None:
        from jupyter_client.blocking import BlockingKernelClient

        self.deadline = deadline
        self.client = BlockingKernelClient()
        self.client.load_connection_info(connection_info)
        self.client.start_channels()
        self.msg_id = self.client.execute(AGENT_CODE, silent=False, store_history=False, allow_stdin=True)
        self.closed = False
        self.pending: dict | None = None
        self.received = 0  # characters the kernel has sent this test cell

    def _next_or_none(self, wait: float) -> dict | None:
        """The kernel's next message within ``wait`` seconds, or None."""
        return self._next(until=min(self.deadline, time.monotonic() + wait))

    def _drain_iopub(self) -> None:
        while True:  # what the student's code prints while checked is nobody's business
            try:
                self.client.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            except ValueError:  # a garbled or replayed message of the kernel's: nobody's business either
                continue

    def _next(self, until: float | None = None) -> Any:
        while True:
            remaining = (until or self.deadline) - time.monotonic()
            if remaining <= 0 and until is not None and until < self.deadline:
                return None
            if remaining <= 0:
                self._interrupt()
                raise CheckerTimeout("the tests timed out waiting for the notebook's code")
            try:
                msg = self.client.get_stdin_msg(timeout=min(remaining, 0.5))
            except queue.Empty:
                self._drain_iopub()
                self._check_alive()
                continue
            if msg.get("msg_type") != "input_request" or msg.get("parent_header", {}).get("msg_id") != self.msg_id:
                continue
            prompt = msg["content"].get("prompt", "")
            if len(prompt) > _MAX_MESSAGE:
                raise CheckerError("the notebook's answer is too large")
            self.received += len(prompt)
            if self.received > _MAX_RECEIVED:  # kept alive by the tests: bounded per test cell
                self._interrupt()
                raise CheckerError(f"the notebook's code sent the tests more than {_MAX_RECEIVED >> 20} MiB "
                                   "in one test cell")
            try:
                message = json.loads(prompt)
            except ValueError:
                raise CheckerError("the notebook's code wrote to the grader's channel (input() while tested?)") from None
            if not isinstance(message, dict):
                raise CheckerError("the kernel sent something that is not a message")
            return message

    def _check_alive(self) -> None:
        try:
            reply = self.client.get_shell_msg(timeout=0)
        except queue.Empty:
            return
        if reply.get("parent_header", {}).get("msg_id") == self.msg_id:
            self.closed = True
            content = reply.get("content", {})
            raise CheckerError(f"the kernel stopped answering the tests ({content.get('ename', 'no error')}: "
                               f"{content.get('evalue', '')})")

    def _interrupt(self) -> None:
        try:
            msg = self.client.session.msg("interrupt_request", {})
            self.client.control_channel.send(msg)
        except Exception:  # noqa: BLE001 - best effort; the notebook's own time limit follows
            pass

    def exchange(self, message: dict) -> dict:
        if self.closed:
            raise CheckerError("the kernel stopped answering the tests")
        if not self.started:
            return self._first(message)
        self.client.input(json.dumps(message))
        return self._next()

    started = False

    def _first(self, message: dict) -> dict:
        """The first question. The kernel's hello may be lost (a stdin message the kernel sends
        before our socket has connected is dropped), so after a moment we ask anyway; a hello
        that then arrives means the kernel had not asked yet and our question was flushed: ask again."""
        hello = self._next_or_none(2.0)
        self.client.input(json.dumps(message))
        while True:
            reply = self._next()
            if "hello" in reply and len(reply) == 1:
                if hello is not None:
                    raise CheckerError("the kernel greeted the checker twice")
                hello = reply
                self.client.input(json.dumps(message))
                continue
            self.started = True
            return reply

    def close(self) -> None:
        if os.environ.get("COURSE_CHECKER_DEBUG"):
            print(f"checker: received {self.received / 2**20:.1f} MiB in this test cell", file=sys.stderr, flush=True)
        try:
            if not self.closed:
                self.client.input(json.dumps({"op": "end"}))
                end = time.monotonic() + 10
                while time.monotonic() < end:
                    try:
                        reply = self.client.get_shell_msg(timeout=0.5)
                    except queue.Empty:
                        continue
                    if reply.get("parent_header", {}).get("msg_id") == self.msg_id:
                        break
            self._drain_iopub()
        finally:
            self.client.stop_channels()

