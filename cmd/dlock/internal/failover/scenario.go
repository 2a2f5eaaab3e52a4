package failover

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// openConcurrency bounds the held leases being taken at once at the start.
const openConcurrency = 16

// run is one run's processes, clients and counters.
type run struct {
	cfg        Config
	files      files
	rs         replicas
	tr         *http.Transport
	holders    []*holder
	ledger     *Ledger
	load       loadStats
	admin      int // the next live replica force-releases go through
	forced     int
	forceErr   int
	notSettled int
	loadTook   time.Duration // how long the load ran
}

// Run starts the replicas, the clients and the load, plays the scenario
// (steady state, SIGKILL of the first replica, wait, restarts, final
// check) and returns what it measured. It ends every process and
// goroutine it started before it returns. An error means the run could
// not be played (a replica did not start, a lease could not be taken at
// the start), not that something was lost.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, ledger: NewLedger(), load: loadStats{statuses: map[string]int{}}}
	r.tr = &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	defer r.tr.CloseIdleConnections()
	var err error
	if r.files, err = writeFiles(cfg.Dir, cfg.Clients+loadWorkers(cfg.LoadRate)); err != nil {
		return Result{}, err
	}
	start := time.Now()
	err = r.play(ctx)
	if serr := r.rs.stopAll(); err == nil {
		err = serr
	}
	if err != nil {
		return Result{}, err
	}
	return r.result(time.Since(start)), nil
}

// play runs the scenario; the caller stops the replicas.
func (r *run) play(ctx context.Context) error {
	if err := r.startReplicas(ctx); err != nil {
		return err
	}
	if err := r.takeLeases(ctx); err != nil {
		return err
	}
	hctx, stopHolders := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	defer hwg.Wait()
	defer stopHolders()
	for _, h := range r.holders {
		hwg.Go(func() { h.follow(hctx) })
	}
	if n := r.settle(ctx); n > 0 {
		return fmt.Errorf("failover: %d of %d events streams did not open within %s", n, len(r.holders), r.cfg.Settle)
	}
	lctx, stopLoad := context.WithCancel(ctx)
	loadStart := time.Now()
	lwg := r.startLoad(lctx)
	err := r.failover(ctx)
	stopLoad()
	lwg.Wait()
	r.loadTook = time.Since(loadStart)
	if err == nil {
		r.finalCheck(ctx)
	}
	return err
}

// startReplicas writes each replica's command line and starts it.
func (r *run) startReplicas(ctx context.Context) error {
	for i, port := range r.cfg.Ports {
		rp := &replica{index: i, base: "http://127.0.0.1:" + strconv.Itoa(port), bin: r.cfg.Bin,
			args: replicaArgs(r.cfg.url(i), port, r.files, r.cfg.LeaseKeyFile),
			log:  filepath.Join(r.cfg.Dir, "replica-"+strconv.Itoa(i)+".log")}
		r.rs = append(r.rs, rp)
		if err := rp.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// endpoints is the address list of the client with token tok, starting
// at replica first.
func (r *run) endpoints(tok string, first int) []*endpoint {
	hc := &http.Client{Transport: r.tr}
	eps := make([]*endpoint, len(r.rs))
	for k := range r.rs {
		eps[k] = &endpoint{base: r.rs[(first+k)%len(r.rs)].base, token: tok, hc: hc}
	}
	return eps
}

// takeLeases has each held-lease client take its lease through the first
// replica of its list (client i starts at replica i mod R).
func (r *run) takeLeases(ctx context.Context) error {
	r.holders = make([]*holder, r.cfg.Clients)
	for i := range r.holders {
		r.holders[i] = &holder{index: i, name: "failover-held-" + strconv.Itoa(i),
			eps: r.endpoints(r.files.clientTokens[i], i%len(r.rs))}
	}
	sem := make(chan struct{}, openConcurrency)
	errs := make([]error, len(r.holders))
	var wg sync.WaitGroup
	for i, h := range r.holders {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ls, err := h.eps[0].acquire(ctx, h.name, r.cfg.HeldTTL, 0, "failover/held-"+strconv.Itoa(i))
			h.id, errs[i] = ls.ID, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failover: take the held leases: %w", err)
	}
	return nil
}

// startLoad starts the load workers; worker k starts at replica k mod R.
func (r *run) startLoad(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	n := loadWorkers(r.cfg.LoadRate)
	if n == 0 {
		return &wg
	}
	every := time.Duration(float64(time.Second) * float64(n) / float64(r.cfg.LoadRate))
	for k := range n {
		w := &loadWorker{index: k, eps: r.endpoints(r.files.clientTokens[r.cfg.Clients+k], k%len(r.rs)),
			cfg: r.cfg, ledger: r.ledger, stats: &r.load}
		wg.Go(func() { w.run(ctx, every) })
	}
	return &wg
}

// settle waits until every client is streaming or has lost its lease, up
// to cfg.Settle, and returns how many were neither then.
func (r *run) settle(ctx context.Context) int {
	deadline := time.Now().Add(r.cfg.Settle)
	for {
		n := 0
		for _, h := range r.holders {
			if !h.settled() {
				n++
			}
		}
		if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// finalCheck asks, for every lease its client still holds, whether the
// replica it streams from holds it.
func (r *run) finalCheck(ctx context.Context) {
	sem := make(chan struct{}, openConcurrency)
	var wg sync.WaitGroup
	for _, h := range r.holders {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h.check(ctx)
		})
	}
	wg.Wait()
}

// forceVictims force-releases up to n leases whose clients are streaming,
// through a live replica's admin endpoint, each after marking its client.
// With no live replica it does nothing.
func (r *run) forceVictims(ctx context.Context, n int) {
	live := r.rs.live()
	if len(live) == 0 {
		return
	}
	for _, i := range rand.Perm(len(r.holders)) {
		if n == 0 {
			return
		}
		h := r.holders[i]
		if !h.force(time.Now()) {
			continue
		}
		n--
		r.admin++
		ep := &endpoint{base: live[r.admin%len(live)].base, token: r.files.adminToken, hc: &http.Client{Transport: r.tr}}
		if err := ep.forceRelease(ctx, h.name); err != nil {
			h.unforce()
			r.forceErr++
			continue
		}
		r.forced++
	}
}
