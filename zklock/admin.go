package zklock

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Holder reads sync first: a ZooKeeper read is served by the server the
// session is connected to, which may lag the leader; sync makes it catch
// up with every write committed before the sync, so an administrator does
// not act on a stale holder.
func (d *zkDriver) sync(ctx context.Context) error {
	_, err := bounded(ctx, func() (string, error) { return d.conn.Sync(d.root) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return permanent(err, d.root)
}

// Inspect returns the holder of name (the first node of its queue), if
// any, after a sync.
func (d *zkDriver) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	if err := d.sync(ctx); err != nil {
		return driver.Holder{}, false, err
	}
	h, _, ok, err := d.head(ctx, name)
	return h, ok, err
}

// head reads name's holder and its node's name, looking again when it
// leaves as it is read.
func (d *zkDriver) head(ctx context.Context, name string) (h driver.Holder, child string, ok bool, err error) {
	dir := d.dir(name)
	for range 3 {
		children, err := d.children(ctx, dir)
		if err != nil {
			return driver.Holder{}, "", false, err
		}
		q := queue(children)
		if len(q) == 0 {
			return driver.Holder{Name: name, TTL: -1}, "", false, nil
		}
		h, err = d.describe(ctx, name, dir, q[0].name)
		if !errors.Is(err, zk.ErrNoNode) {
			return h, q[0].name, err == nil, err
		}
	}
	return driver.Holder{}, "", false, errors.New("zookeeper: the queue kept changing under three reads")
}

// List returns the holder of every name starting with prefix, sorted by
// name, after a sync.
func (d *zkDriver) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	if err := d.sync(ctx); err != nil {
		return nil, err
	}
	dirs, err := d.children(ctx, d.root)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range dirs {
		if name, ok := unescapeName(e); ok && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var hs []driver.Holder
	for _, name := range names {
		h, _, ok, err := d.head(ctx, name)
		if err != nil {
			return nil, err
		}
		if ok {
			hs = append(hs, h)
		}
	}
	return hs, nil
}

// ForceRelease deletes the holder's node, after a sync. No counter is
// needed: in the same transaction it writes the lock's znode, whose new
// mzxid (that transaction's zxid) is returned as the new fence; every
// later grant's node is created by a later transaction, with a greater
// czxid. When the name is free, the highest zxid the lock's znode has
// seen is returned. The evicted holder learns of it at its next refresh.
func (d *zkDriver) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	if err := d.sync(ctx); err != nil {
		return driver.Holder{}, false, 0, err
	}
	dir := d.dir(name)
	for range 3 {
		h, child, ok, err := d.head(ctx, name)
		if err != nil {
			return driver.Holder{}, false, 0, err
		}
		if !ok {
			fence, err := d.lastZxid(ctx, dir)
			return h, false, fence, err
		}
		res, err := bounded(ctx, func() ([]zk.MultiResponse, error) {
			return d.conn.Multi(&zk.DeleteRequest{Path: dir + "/" + child, Version: -1}, &zk.SetDataRequest{Path: dir, Version: -1})
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // the holder left meanwhile
		}
		if err != nil {
			return driver.Holder{}, false, 0, permanent(err, dir)
		}
		return h, true, uint64(res[1].Stat.Mzxid), nil
	}
	return driver.Holder{}, false, 0, errors.New("zookeeper: the queue kept changing under three reads")
}

// lastZxid is the greatest zxid that created, changed or changed the
// children of dir (0 when it does not exist): any later create exceeds it.
func (d *zkDriver) lastZxid(ctx context.Context, dir string) (uint64, error) {
	ok, st, err := bounded3(ctx, func() (bool, *zk.Stat, error) { return d.conn.Exists(dir) })
	if err != nil || !ok {
		return 0, permanent(err, dir)
	}
	return uint64(max(st.Czxid, st.Mzxid, st.Pzxid)), nil
}
