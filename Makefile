# make test: what CI runs (bash .ci/run installs the servers first).
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
TEST_TIMEOUT ?= 40m

.PHONY: test lint vet fmt staticcheck unit bench demo chaos

test: lint unit

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
unit:
	$(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./...

bench:
	$(GO) test -run '^$$' -bench '^Benchmark(Uncontended|Contended)$$' -benchtime 2000x -p 1 ./filelock ./redislock ./redlock ./pglock ./etcdlock

demo:
	$(GO) run ./cmd/dlock demo

# make chaos: the fault suite (package chaos) in full, at least 20 trials of
# each scenario against real servers; not part of make test, which runs its
# short subset. The verdict table goes to stdout and to CHAOS_OUT.
CHAOS_OUT ?= chaos/RESULTS.md
CHAOS_TIMEOUT ?= 90m

chaos:
	DLOCK_CHAOS=full DLOCK_CHAOS_OUT=$(abspath $(CHAOS_OUT)) $(GO) test -count=1 -p 1 -v -timeout $(CHAOS_TIMEOUT) ./chaos/
