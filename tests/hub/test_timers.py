"""The shared timers (the hub's runs', the client's calls'): one thread for all, each
callback on a thread of its own, cancelled ones gone from memory."""
from __future__ import annotations

import threading
import time

from murmur_wsgi.timers import Timers

from tests.hub.conftest import wait_until


def test_timers_fire_in_order_of_their_deadlines_each_on_its_own_thread():
    timers = Timers()
    fired, threads = [], set()
    done = threading.Event()

    def call(name):
        def fn():
            fired.append(name)
            threads.add(threading.get_ident())
            if len(fired) == 3:
                done.set()
        return fn
    # NOTE: the order expected is the deadlines' as scheduled, a quarter second apart: a
    # test thread paused between two calls (a loaded machine) moves a deadline, not the rule.
    deadlines = {}
    try:
        for name, delay in (("late", 0.5), ("early", 0.25), ("now", 0.0)):
            deadlines[name] = time.monotonic() + delay      # "early": before what it waits for
            timers.after(delay, call(name))
        assert done.wait(5)
        assert fired == sorted(deadlines, key=deadlines.get)
        assert threading.get_ident() not in threads
    finally:
        timers.close()


def test_a_cancelled_timer_never_fires_and_is_not_kept():
    timers = Timers()
    fired = threading.Event()
    try:
        kept = [timers.after(3600, fired.set) for _ in range(1000)]
        for timer in kept:
            timer.cancel()
        assert timers.pending() == 0
        # Rebuilt once the cancelled were more than half: the heap holds few of them.
        assert len(timers._heap) <= 1
        probe = threading.Event()
        timers.after(0, probe.set)
        assert probe.wait(5)
        assert not fired.is_set()
    finally:
        timers.close()


def test_a_failing_callback_is_logged_and_the_others_still_fire(caplog):
    timers = Timers()
    later = threading.Event()

    def boom():
        raise RuntimeError("boom")
    try:
        timers.after(0, boom)
        timers.after(0.01, later.set)
        assert later.wait(5)
        wait_until(lambda: "a timer failed" in caplog.text)
    finally:
        timers.close()


def test_closed_timers_fire_nothing_and_their_thread_ends():
    timers = Timers()
    fired = threading.Event()
    timers.after(0.05, fired.set)
    thread = timers._thread
    timers.close()
    thread.join(5)
    assert not thread.is_alive()
    late = timers.after(0, fired.set)
    assert late.cancelled and timers.pending() == 0 and timers._thread is thread
    assert not fired.is_set()


def test_the_thread_is_woken_only_for_a_timer_due_before_it_wakes_by_itself():
    """A run's timeout (minutes away) is pushed and cancelled without a turn of the
    thread; one due before the thread's own wake-up wakes it, and fires on time."""
    timers = Timers()
    woken = []
    fired = threading.Event()
    try:
        timers.after(3600, fired.set)                # starts the thread, which waits
        wait_until(lambda: timers._wake_at > 0)
        notify = timers._changed.notify
        timers._changed.notify = lambda *a: (woken.append(1), notify(*a))
        for _ in range(100):
            timers.after(300, fired.set).cancel()    # a message's run timeout
        assert woken == []
        soon = threading.Event()
        timers.after(0.01, soon.set)
        assert woken == [1] and soon.wait(5)
        assert not fired.is_set()
    finally:
        timers.close()
