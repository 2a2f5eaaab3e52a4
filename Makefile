# make test: what CI runs (sudo bash .ci/run installs the servers first).
GO ?= go
SHELL := /bin/bash
STATICCHECK_VERSION ?= v0.8.2
TEST_TIMEOUT ?= 40m

.PHONY: test test-long lint vet fmt staticcheck unit otel examples-gocron bench bench-compare bench-readme bench-growth bench-profile bench-floor bench-render demo chaos chaos-render slots failover failover-render

test: lint unit otel examples-gocron

lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# -p 1: the suites start real servers and measure leases against real time;
# one package at a time keeps a 2-core machine from starving them.
# A test whose server binary is missing skips (fails under
# DLOCK_TEST_REQUIRE_SERVERS=1) and is recorded in DLOCK_TEST_SKIPS; the
# run ends with what was not tested and how to install the servers.
# PKGS picks packages: make unit PKGS=./redislock
PKGS ?= ./...
unit:
	@skips=$$(mktemp -t dlock-test-skips.XXXXXX); \
	echo "$(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(PKGS)"; \
	DLOCK_TEST_SKIPS=$$skips $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(PKGS); rc=$$?; \
	$(GO) run ./internal/testing/testserver/skipsummary $$skips; rm -f $$skips; exit $$rc

# make test-long: the unit tests in their long forms (docs/testing.md):
# every demo scenario on every server backend, more fault trials, the
# controls whose counts are logged. Not part of make test.
test-long:
	DLOCK_TEST_LONG=1 DLOCK_TEST_TRIALS=5 TEST_TIMEOUT=90m $(MAKE) unit

# The OpenTelemetry instrumentation is its own module (dlockotel), so that
# the core does not depend on OpenTelemetry: vet, lint and test it apart.
otel:
	cd dlockotel && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./... && $(GO) test -race -count=1 ./...

# The gocron adapters (examples/gocron) are their own module too, so that
# the core does not depend on gocron: vet, lint and test them apart.
examples-gocron:
	cd examples/gocron && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./... && $(GO) test -race -count=1 ./...

# The drivers' go test benchmarks (workloads from internal/benchwork).
bench:
	$(GO) test -run '^$$' -bench '^Benchmark(Uncontended|Contended)$$' -benchtime 2000x -p 1 ./filelock ./redislock ./redlock ./pglock ./etcdlock ./zklock

# dlock against the hand-written baseline on one backend:
#   make bench-compare DLOCK_URL=redis://127.0.0.1:6379
bench-compare:
	$(GO) run ./cmd/dlock bench --compare

# Start every backend's test server; measure dlock against the strongest
# hand-written baselines (bench --compare, three times over all backends:
# each target is judged by most runs, each table shows the median run),
# 10,000 leases held (--leases), the HTTP API (--serve), leader failover
# (--election) and a semaphore (--semaphore); write docs/benchmarks.json,
# then render from it docs/benchmarks.md (its summary and tables) and
# docs/benchmarks.svg. DLOCK_BENCH_DURATION (default 3s per side and
# workload), DLOCK_BENCH_RUNS (default 3) and DLOCK_BENCH_LEASES (default
# 10000) tune it. TestBenchDocsCurrent (in
# make test) fails while any published figure differs from what
# docs/benchmarks.json renders.
bench-readme:
	DLOCK_BENCH_UPDATE=1 $(GO) test -run '^TestRegenerateBench$$' -count=1 -v -timeout 60m ./cmd/dlock/internal/benchreport

# Start Redis, a Redis Cluster of 3 primaries, PostgreSQL (lease mode) and
# etcd; hold 1,000, 10,000 and 100,000 leases on one Locker of each
# (bench --leases) and record the time to take them, the refresh round
# trips per watchdog tick, the client's heap per lease and the leases
# lost; write docs/growth.json, then render from it the growth table of
# docs/benchmarks.md and docs/growth.svg. TestBenchDocsCurrent (in make
# test) fails while either differs from what docs/growth.json renders.
bench-growth:
	DLOCK_GROWTH_UPDATE=1 $(GO) test -run '^TestRegenerateGrowth$$' -count=1 -v -timeout 60m ./cmd/dlock/internal/benchreport

# For every backend that misses an uncontended target in
# docs/benchmarks.json: start its server, run the uncontended workload
# (16 goroutines, 3 s) on dlock's side alone and then on the baseline's
# alone under Go's CPU profiler (the client's CPU: the servers are other
# processes), and run the server's standard load tool against it
# (redis-benchmark, pgbench, mysqlslap; etcd has none), and where a
# contended target is missed, profile the contended workload too and run
# the load tool on what bounds it (pgbench: the blocking advisory lock,
# the NOTIFY a lease hand-off sends); write
# docs/profiles.json, then render from it the profile block of
# docs/benchmarks.md. A missing load tool is recorded as not installed.
# TestBenchDocsCurrent (in make test) fails while the block differs from
# what docs/profiles.json renders.
bench-profile:
	DLOCK_PROFILE_UPDATE=1 $(GO) test -run '^TestRegenerateProfiles$$' -count=1 -v -timeout 30m ./cmd/dlock/internal/benchreport

# Start Redis, PostgreSQL and etcd; record the messages one uncontended
# cycle of dlock's and of the hand-written baseline sends, and send them
# again as they are, with no client code of either side, from 1 and 16
# goroutines, three times over; write docs/floors.json, then render from
# it the floor table of docs/benchmarks.md. TestBenchDocsCurrent (in make
# test) fails while the table differs from what docs/floors.json renders.
bench-floor:
	DLOCK_FLOOR_UPDATE=1 $(GO) test -run '^TestRegenerateFloors$$' -count=1 -v -timeout 30m ./cmd/dlock/internal/baseline
	$(MAKE) bench-render

# Render the published figures again from the committed
# docs/benchmarks.json, docs/growth.json, docs/profiles.json and docs/floors.json, measuring nothing (after a
# change to how they are rendered, or to the prose around them).
bench-render:
	DLOCK_BENCH_RENDER=1 $(GO) test -run '^TestBenchDocsCurrent$$' -count=1 ./cmd/dlock/internal/benchreport

demo:
	$(GO) run ./cmd/dlock demo

# make chaos: the fault suite (package chaos) in full, at least 20 trials of
# each scenario against real servers; not part of make test, which runs its
# short subset. The verdict table goes to stdout and to CHAOS_OUT.
CHAOS_OUT ?= chaos/RESULTS.md
CHAOS_TIMEOUT ?= 90m

chaos:
	DLOCK_CHAOS=full DLOCK_CHAOS_OUT=$(abspath $(CHAOS_OUT)) $(GO) test -count=1 -p 1 -v -timeout $(CHAOS_TIMEOUT) ./chaos/
	$(MAKE) chaos-render

# The fault-suite summary in docs/chaos.md, rendered from chaos/RESULTS.md.
chaos-render:
	DLOCK_CHAOS_RENDER=1 $(GO) test -count=1 -run '^TestPublishedSummaryCurrent$$' ./chaos/

# make slots: once per slot, 30 slots on every backend, five runner
# processes whose clocks are off by up to 40% of the period (make test
# runs 3 slots per backend). The per-backend lines (slots, runs, doubles,
# misses) go to docs/slots-results.txt, which docs/slots.md cites.
slots:
	@set -o pipefail; DLOCKTEST_SLOTS=30 $(GO) test -count=1 -p 1 -v -run 'TestConformance.*/RunOnce/Skew' -timeout 60m ./filelock ./redislock ./redlock ./pglock ./etcdlock ./zklock \
		| tee /dev/stderr | grep -E '^(ok|FAIL|--- |    --- )|processes, clocks' > docs/slots-results.tmp
	@{ echo "# make slots, $$(date -u +%Y-%m-%d) on $$(nproc) cores: once per slot, 5 processes with skewed clocks"; cat docs/slots-results.tmp; } > docs/slots-results.txt
	@rm -f docs/slots-results.tmp

# make failover: replicas of dlock serve on every backend (3 replicas, then
# 1 to show what a single server loses), 200 held leases and 1,000
# acquire/release cycles/s, one replica SIGKILLed, then every replica
# restarted one by one; writes docs/failover.json and renders its table
# into docs/serve.md. make test runs a short run (2 replicas, 20 clients)
# and TestFailoverDocsCurrent, which fails while the table differs from
# what docs/failover.json renders.
failover:
	DLOCK_FAILOVER=1 $(GO) test -count=1 -p 1 -v -run '^TestFailoverFull$$' -timeout 60m ./cmd/dlock/internal/failover

# Render the failover table again from the committed docs/failover.json,
# measuring nothing.
failover-render:
	DLOCK_FAILOVER_RENDER=1 $(GO) test -count=1 -run '^TestFailoverDocsCurrent$$' ./cmd/dlock/internal/failover
