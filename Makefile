# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= conf/murmur.yaml

.PHONY: run hub test bench bench-instructions bench-streams bench-hub clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: setup.py setup.cfg | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: setup.py setup.cfg | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

# LISTEN=HOST:PORT serves elsewhere (make run LISTEN=127.0.0.1:41874): the door's card
# follows the address it listens on unless the manifest sets network.public_url.
run: $(VENV)/.installed
	$(BIN)/murmur-wsgi serve --config $(CONFIG) $(if $(LISTEN),--listen $(LISTEN))

# The hub (docs/hub.md): conf/hub.yaml's tenants and agents on http://127.0.0.1:41880.
# LISTEN=HOST:PORT serves elsewhere and announces http://HOST:PORT in the cards
# (PUBLIC_URL=https://… announces another base URL, e.g. behind a proxy).
HUB_CONFIG ?= conf/hub.yaml
PUBLIC_URL ?= $(if $(LISTEN),http://$(LISTEN))
hub: $(VENV)/.installed
	$(BIN)/murmur-wsgi hub --config $(HUB_CONFIG) $(if $(LISTEN),--listen $(LISTEN)) \
		$(if $(PUBLIC_URL),--public-url $(PUBLIC_URL))

# The hub's Redis tests start their own redis-server: tests/ensure_redis.sh installs it when
# missing (root with apt-get), else says what to install and fails.
# The suite starts the commands in many processes: the sources are compiled once first
# (PYTHONDONTWRITEBYTECODE, where it is set, keeps each process from caching its own).
# pytest imports the test modules rewritten (its assertions' messages), from bytecode of its
# own that compileall does not write: a collection in two processes writes it first. Each
# worker collecting then reads it: 3.2 s of CPU, not 9.8 s rewriting every module itself.
# Most of the suite's time is spent waiting on the servers it starts, so it runs in
# PYTEST_WORKERS processes (pytest-xdist), but for the tests marked `timed`: they assert a
# wall-clock bound. Those also marked `waits` spend that bound waiting on deadlines and on
# the servers they start (a tenth of a core on average: 4.7 s of CPU in their 46 s of
# calls; the most, half a core for 1.5 s): they run beside the others, in one process of
# their own (TIMED_WORKERS: more), their output printed once both are done, each run
# drawing its servers' ports from a range of its own (tests/ports.py). The timed tests
# that compute, or whose bound leaves no room for the others' CPU, run last, alone.
# The parallel run hands the tests out as the processes ask (``worksteal``: one that has
# finished takes half of another's queue), the longest modules first (tests/conftest.py):
# handed out in fixed shares, one process ran half a minute after the others were done.
# Four on a 2-core machine: two kept its cores busy about half the run (230 s of CPU in a
# 219 s run); with three they were still busy about 60 % of it (184 s of not-timed tests
# on a fresh clone, 147 s with four).
PYTEST_WORKERS ?= 4
TIMED_WORKERS ?= 0
test: $(VENV)/.installed-test
	@sh tests/ensure_redis.sh
	@$(BIN)/python -m compileall -q murmur_wsgi tests bench examples > /dev/null
	@export PYTHONDONTWRITEBYTECODE=; \
	$(BIN)/python -m pytest -q --collect-only -p no:xdist tests/hub > /dev/null 2>&1 & \
	$(BIN)/python -m pytest -q --collect-only -p no:xdist tests/door tests/e2e tests/shared \
		> /dev/null 2>&1; wait
	@waits_log=$$(mktemp); \
	MURMUR_TEST_PORTS=18000-20000 \
	$(BIN)/python -m pytest -q -n $(TIMED_WORKERS) --dist loadfile -m "timed and waits" \
		$(PYTEST_ARGS) > $$waits_log 2>&1 & waits=$$!; \
	echo "$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal -m \"not timed\" $(PYTEST_ARGS)"; \
	MURMUR_TEST_PORTS=10000-18000 \
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal -m "not timed" $(PYTEST_ARGS); others=$$?; \
	wait $$waits; waited=$$?; \
	echo "$(BIN)/python -m pytest -q -n $(TIMED_WORKERS) --dist loadfile -m \"timed and waits\" $(PYTEST_ARGS) (beside them)"; \
	cat $$waits_log; rm -f $$waits_log; \
	[ $$others -eq 0 ] && { [ $$waited -eq 0 ] || [ $$waited -eq 5 ]; }
	$(BIN)/python -m pytest -q -m "timed and not waits" $(PYTEST_ARGS) || [ $$? -eq 5 ]

# Requests/s of the door against a bare WSGI app (wrk), then bytes per finished task.
# BENCH_ARGS passes options to bench/run.py, e.g. BENCH_ARGS="-d 30 -k gettask".
# The hub-on-Redis scenarios need redis-server (installed when it can be, else skipped).
bench: $(VENV)/.installed-test
	-@sh tests/ensure_redis.sh
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/memory.py

# Instructions per request of each application (valgrind's callgrind counts them: the same
# figures whatever else the machine runs). BENCH_INSTRUCTIONS_ARGS: e.g. "-n 400 -k hub".
bench-instructions: $(VENV)/.installed-test
	-@sh tests/ensure_redis.sh
	$(BIN)/python bench/instructions.py $(BENCH_INSTRUCTIONS_ARGS)

# Idle murmur.WatchSession streams (RSS per stream) and fan-out latency to subscribers.
# BENCH_STREAMS_ARGS passes options to bench/streams.py, e.g. "-n 2000 -s 500 -r 20 --bare".
bench-streams: $(VENV)/.installed
	$(BIN)/python bench/streams.py $(BENCH_STREAMS_ARGS)

# The hub on Redis: cross-replica event latency and CancelTask from the other replica, on one
# redis-server and on a 3-primary Redis Cluster, then 2,000 idle SubscribeToTask streams on one worker (Redis connections, commands/s, RSS per
# stream, CancelTask to every final event), with the run on the same replica and on another.
# BENCH_HUB_ARGS passes options to bench/hub_replicas.py, e.g. "-r 10 -s 3 -c 50";
# BENCH_HUB_STREAMS_ARGS to bench/hub_streams.py, e.g. "-n 5000 -s 20".
bench-hub: $(VENV)/.installed-test
	@sh tests/ensure_redis.sh
	$(BIN)/python bench/hub_replicas.py $(BENCH_HUB_ARGS)
	$(BIN)/python bench/hub_replicas.py --cluster $(BENCH_HUB_ARGS)
	$(BIN)/python bench/hub_streams.py $(BENCH_HUB_STREAMS_ARGS)
	$(BIN)/python bench/hub_streams.py --replicas 2 $(BENCH_HUB_STREAMS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
