package zklock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// The run ledger's reads and writes on ZooKeeper (see ledger.go).

// errStale reports that the ledger changed between two reads, or that a
// write's outcome is unknown after a reconnect: the write is decided
// again on a fresh read (which finds it recorded, if it was applied).
var errStale = errors.New("zookeeper: the run ledger changed as it was read")

// readLedger reads name's ledger znode dir and, with children, its slots
// at the same version (every change of the children changes the data
// version too). A missing znode is a new ledger.
func (d *zkDriver) readLedger(ctx context.Context, dir string, children bool) (ledgerState, error) {
	g, err := d.get(ctx, dir)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return ledgerState{}, nil
	case err != nil:
		return ledgerState{}, permanent(err, dir)
	}
	highest, err := strconv.ParseUint(string(g.data), 10, 64)
	if err != nil {
		return ledgerState{}, fmt.Errorf("zookeeper: run ledger %s holds %.32q, not a fence", dir, g.data)
	}
	st := ledgerState{exists: true, highest: highest, version: g.st.Version}
	if children {
		if st.slots, err = d.slotsAt(ctx, dir, st.version); err != nil {
			return ledgerState{}, err
		}
	}
	return st, nil
}

// slotsAt lists the slot children of dir, or errStale when dir's version
// is no longer version.
func (d *zkDriver) slotsAt(ctx context.Context, dir string, version int32) ([]string, error) {
	type got struct {
		children []string
		st       *zk.Stat
	}
	g, err := bounded(ctx, func() (got, error) {
		c, st, err := d.conn.Children(dir)
		return got{c, st}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, errStale
	case err != nil:
		return nil, permanent(err, dir)
	case g.st.Version != version:
		return nil, errStale
	}
	var slots []string
	for _, c := range g.children {
		if isSlotName(c) {
			slots = append(slots, c)
		}
	}
	return slots, nil
}

// readRun reads the record of slot in name's ledger dir, and the version
// of its znode; errStale when it is gone.
func (d *zkDriver) readRun(ctx context.Context, dir, slot, name string) (driver.RunRecord, int32, error) {
	p := dir + "/" + slot
	g, err := d.get(ctx, p)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return driver.RunRecord{}, 0, errStale
	case err != nil:
		return driver.RunRecord{}, 0, permanent(err, p)
	}
	r, err := decodeRun(name, g.data)
	return r, g.st.Version, err
}

// znodeData is a znode's data and Stat.
type znodeData struct {
	data []byte
	st   *zk.Stat
}

// get reads the znode at p.
func (d *zkDriver) get(ctx context.Context, p string) (znodeData, error) {
	return bounded(ctx, func() (znodeData, error) {
		data, st, err := d.conn.Get(p)
		return znodeData{data, st}, err
	})
}

// readRuns reads the records of slots in name's ledger dir, all at once
// (ZooKeeper pipelines a session's requests), in the order given; a slot
// trimmed meanwhile is left out.
func (d *zkDriver) readRuns(dir, name string, slots []string) ([]driver.RunRecord, error) {
	recs := make([]driver.RunRecord, len(slots))
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Go(func() {
			data, _, err := d.conn.Get(dir + "/" + s)
			if err == nil {
				recs[i], err = decodeRun(name, data)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	runs := make([]driver.RunRecord, 0, len(slots))
	for i := range slots {
		switch {
		case errors.Is(errs[i], zk.ErrNoNode):
		case errs[i] != nil:
			return nil, permanent(errs[i], dir)
		default:
			runs = append(runs, recs[i])
		}
	}
	return runs, nil
}

// ledgerMulti sends a ledger write. A missing parent (the first write
// under this root) is created and the write decided again (ErrNoNode); a
// write whose reply was lost with the connection is errStale once the
// connection is back (within the session timeout), so that the fresh
// read tells whether it was applied.
func (d *zkDriver) ledgerMulti(ctx context.Context, dir string, ops []any) error {
	_, err := bounded(ctx, func() ([]zk.MultiResponse, error) { return d.conn.Multi(ops...) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		if err := d.makeLedgerRoot(ctx); err != nil {
			return err
		}
		return errStale
	case transportErr(err) && ctx.Err() == nil:
		rctx, cancel := context.WithTimeout(ctx, d.timeout)
		defer cancel()
		if d.reconnected(rctx) == nil {
			return errStale
		}
	}
	return permanent(err, dir)
}

// makeLedgerRoot creates the znode of every name's ledger (persistent),
// and the root first when it is missing. Another process creating it
// meanwhile is no error.
func (d *zkDriver) makeLedgerRoot(ctx context.Context) error {
	create := func() (string, error) { return d.conn.Create(d.ledgerRoot(), nil, zk.FlagPersistent, d.acl) }
	_, err := bounded(ctx, create)
	if errors.Is(err, zk.ErrNoNode) {
		if err = d.makeRoot(ctx); err == nil {
			_, err = bounded(ctx, create)
		}
	}
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return permanent(err, d.ledgerRoot())
}
